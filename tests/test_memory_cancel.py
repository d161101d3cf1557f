"""A sync activity's cancellation lands anywhere in its thread (issue 34 item 7).

When Temporal cancels a synchronous activity (a local activity that timed out, a
workflow evicted from the cache, a worker shutting down), the SDK raises CancelledError
asynchronously into the thread running it, at whatever line it has reached. A memory
being opened or closed there must never keep its owner lock (the worker then refused
the principal as "in use" by itself for as long as it ran), and the cancellation must
come out as a cancellation, not as a broken vector store.

Each test runs the step once without interruption to list the lines it executes, then
once per line with the SDK's own cancellation (temporalio.testing.ActivityEnvironment,
whose cancel() raises into the thread like a worker does) requested at that line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.exceptions import CancelledError
from temporalio.testing import ActivityEnvironment

import vicar
import vicar.activities
import vicar.memory.principal as principal_module
from vicar.memory.chunk import MemoryChunk
from vicar.memory.owner import holder_of
from vicar.memory.principal import PrincipalMemory
from vicar.memory.registry import MemoryRegistry
from vicar.settings import MemoryParams

# Vicar's code, wherever it is installed: the memory, the rest of the package, the activities.
MEMORY = Path(principal_module.__file__).parent
OURS = tuple(str(Path(str(m.__file__)).parent) + os.sep for m in (principal_module, vicar, vicar.activities))
# The standard library's waiting and threading primitives: a cancellation landing in them
# (a Condition's wait, a thread's start) can leave a lock half taken.
PRIMITIVES = tuple(
    os.path.join(os.path.dirname(threading.__file__), f) for f in ("threading.py", "queue.py", "concurrent")
)


def ours_and_primitives(filename: str) -> bool:
    return filename.startswith(OURS) or filename.startswith(PRIMITIVES)


def chunk(principal: str, i: int) -> MemoryChunk:
    return MemoryChunk(
        id=f"c{i}",
        principal=principal,
        state="PLAN_ASSERT",
        task_type="docs",
        outcome="approve",
        answered_by="human",
        question=f"Approve doc change {i}?",
        artifact_excerpt=f"Change {i}.",
        human_response=f"ok {i}",
        created_n=i,
        traces=[i],
    )


class Tracer:
    """Follows the lines one thread executes in the chosen files. Without `cancel_at`,
    lists them (each distinct line once, in first-seen order); with it, has the activity
    cancelled when that line is reached."""

    def __init__(self, wanted: Callable[[str], bool], cancel_at: tuple[str, int] | None = None, env=None) -> None:
        self.wanted, self.cancel_at, self.env = wanted, cancel_at, env
        self.lines: dict[tuple[str, int], None] = {}
        self.fired = False

    def __call__(self, frame, event, arg):
        return self._line if self.wanted(frame.f_code.co_filename) else None

    def _line(self, frame, event, arg):
        if event == "line":
            here = (frame.f_code.co_filename, frame.f_lineno)
            self.lines.setdefault(here)
            if here == self.cancel_at and not self.fired:
                self.fired = True
                self.env.cancel()  # the SDK's thread raiser: CancelledError lands in this thread
        return self._line


def run_traced(step: Callable[[], object], tracer: Tracer, env: ActivityEnvironment) -> BaseException | None:
    """Run `step` as a sync activity on its own thread, traced; what it raised, if anything."""
    raised: list[BaseException] = []

    def body() -> None:
        sys.settrace(tracer)
        try:
            env.run(step)
        except BaseException as exc:  # noqa: BLE001 - the test sorts what came out
            raised.append(exc)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=body, daemon=True)  # daemon: a hung step fails the test, not the run
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), f"the step hung (cancelled at {tracer.cancel_at})"
    return raised[0] if raised else None


def drop_leaked(directory: Path) -> None:
    """Close this process's descriptors on the memory's lock file: a leak the last run
    made (reported already), so each line is judged alone."""
    lock = (directory / "owner.lock").resolve()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if fd.resolve() == lock:
                os.close(int(fd.name))
        except OSError:
            pass


def settled(principal: str) -> None:
    """Wait until the registry's threads for this principal are done: an open or close a
    cancelled caller left behind goes on without it."""
    while any(t.name == f"vicar-memory-{principal}" for t in threading.enumerate()):
        time.sleep(0.01)


def lock_state(directory: Path) -> str:
    holder = holder_of(directory)
    if holder is None:
        return "free"
    return "held by this process" if holder.get("pid") == os.getpid() else f"held by {holder}"


@pytest.fixture
def memory_dir(tmp_path, embedder):
    """A principal's memory with a few chunks and their vectors, closed."""
    mem = PrincipalMemory("cancelled", tmp_path, embedder, MemoryParams())
    for i in range(1, 4):
        mem.record(chunk("cancelled", i))
    mem.close()
    return tmp_path


def sweep(
    step: Callable[[], object],
    wanted: Callable[[str], bool],
    check: Callable[[BaseException | None], str],
    setup: Callable[[], None] = lambda: None,
):
    """Cancel `step` at each line it runs; `check` says what is wrong after each (or '');
    `setup` runs before each run."""
    probe = Tracer(wanted)
    setup()
    assert run_traced(step, probe, ActivityEnvironment()) is None
    assert probe.lines, "the step ran none of the traced lines"
    problem = check(None)
    assert problem == "", f"uninterrupted: {problem}"
    wrong = []
    for where in probe.lines:
        setup()
        env = ActivityEnvironment()
        tracer = Tracer(wanted, where, env)
        raised = run_traced(step, tracer, env)
        problem = check(raised)
        if problem:
            wrong.append(f"{Path(where[0]).name}:{where[1]}: {problem}"[:300])
    return list(probe.lines), wrong


def outcome(raised: BaseException | None) -> str:
    return "" if raised is None or isinstance(raised, CancelledError) else f"raised {type(raised).__name__}: {raised}"


def test_a_registry_open_cancelled_at_any_line_keeps_no_lock_and_says_cancelled(memory_dir, embedder):
    """The worker's path: an activity thread asks the registry for a memory that is not
    open yet. Wherever the cancellation lands, it comes out as CancelledError, and the
    process can then use the memory (no lock held by itself that it refuses)."""
    registry = MemoryRegistry(memory_dir, lambda: embedder, MemoryParams())
    directory = memory_dir / "cancelled"

    def check(raised: BaseException | None) -> str:
        problems = [outcome(raised)]
        settled("cancelled")
        try:
            mem = registry.get("cancelled")  # whatever the cancelled call left behind
            problems.append("" if mem.size() == 3 else f"{mem.size()} chunks")
            problems.append("" if lock_state(directory) == "held by this process" else lock_state(directory))
        except Exception as exc:  # noqa: BLE001 - reported with the line
            problems.append(f"then refused: {type(exc).__name__}: {exc}")
        registry.release("cancelled")
        state = lock_state(directory)
        problems.append("" if state == "free" else f"after release: {state}")
        drop_leaked(directory)
        return "; ".join(p for p in problems if p)

    try:
        lines, wrong = sweep(lambda: registry.get("cancelled"), ours_and_primitives, check)
    finally:
        registry.close()
    assert wrong == [], f"{len(wrong)} of {len(lines)} lines:\n" + "\n".join(wrong)
    assert lock_state(directory) == "free"


def test_a_registry_release_cancelled_at_any_line_keeps_no_lock(memory_dir, embedder):
    """A move lets go of a memory from an activity thread: cancelled anywhere, the memory
    is either still open (and usable) or closed with its lock free, never closed with
    its lock kept."""
    registry = MemoryRegistry(memory_dir, lambda: embedder, MemoryParams())
    directory = memory_dir / "cancelled"
    registry.get("cancelled")

    def check(raised: BaseException | None) -> str:
        problems = [outcome(raised)]
        settled("cancelled")
        try:
            registry.get("cancelled")
        except Exception as exc:  # noqa: BLE001 - reported with the line
            problems.append(f"then refused: {type(exc).__name__}: {exc}")
            drop_leaked(directory)
            registry.get("cancelled")
        state = lock_state(directory)
        problems.append("" if state == "held by this process" else state)
        return "; ".join(p for p in problems if p)

    try:
        lines, wrong = sweep(lambda: registry.release("cancelled"), ours_and_primitives, check)
    finally:
        registry.close()
    assert wrong == [], f"{len(wrong)} of {len(lines)} lines:\n" + "\n".join(wrong)
    assert lock_state(directory) == "free"


def test_a_memory_whose_open_is_cancelled_releases_its_lock(memory_dir, embedder):
    """PrincipalMemory itself, outside the registry: an open that fails anywhere after
    the lock was taken (here: cancelled at each line of the memory's and the lock's
    code) leaves the lock free."""
    directory = memory_dir / "cancelled"
    opened: list[PrincipalMemory] = []

    def step() -> None:
        opened.append(PrincipalMemory("cancelled", memory_dir, embedder, MemoryParams()))

    def check(raised: BaseException | None) -> str:
        if raised is None:
            opened.pop().close()
        state = lock_state(directory)
        drop_leaked(directory)
        return "" if state == "free" else f"{type(raised).__name__ if raised else 'opened'}, then {state}"

    wanted = (str(MEMORY / "principal.py"), str(MEMORY / "owner.py"))
    lines, wrong = sweep(step, lambda f: f in wanted, check)
    assert wrong == [], f"{len(wrong)} of {len(lines)} lines:\n" + "\n".join(wrong)


def test_a_memory_whose_close_fails_releases_its_lock(memory_dir, embedder):
    """close() releases the lock even when closing the records or the vectors fails
    (here: cancelled at each line of those steps)."""
    directory = memory_dir / "cancelled"
    current: list[PrincipalMemory] = []

    def setup() -> None:
        owner = current[0]._owner if current else None
        if owner is not None and lock_state(directory) != "free":
            owner.release()  # the last run's leak, reported already: each line is judged alone
        current[:] = [PrincipalMemory("cancelled", memory_dir, embedder, MemoryParams())]

    def check(raised: BaseException | None) -> str:
        state = lock_state(directory)
        return "" if state == "free" else f"{type(raised).__name__ if raised else 'closed'}, then {state}"

    wanted = (str(MEMORY / "store.py"), str(MEMORY / "vectors.py"))
    try:
        lines, wrong = sweep(lambda: current[0].close(), lambda f: f in wanted, check, setup)
    finally:
        current[0].close()
    assert wrong == [], f"{len(wrong)} of {len(lines)} lines:\n" + "\n".join(wrong)
