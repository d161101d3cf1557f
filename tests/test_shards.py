"""Principal-affine memory: shards on task queues (vicar.runtime.sharding), in one process.

The multi-process run (three workers on loopback, a SIGKILL, a move) is in
test_multiworker.py."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from vicar import contracts as c
from vicar.client.gates import answer_gate
from vicar.errors import Conflict, InvalidInput
from vicar.memory.registry import MemoryRegistry
from vicar.models import GateResult, HumanAnswer
from vicar.models.brain import BrainStatus
from vicar.runtime.sharding import parse_count, parse_shards, shard_of

from .conftest import VicarHarness, let_test_responders_in, wait_for
from .shard_homes import move, sharded, two_homes
from .test_broken_store import wait_proxy_error
from .test_gate import run_answering


def test_shard_specs():
    assert parse_shards("all", 4) == [0, 1, 2, 3]
    assert parse_shards("0-1,3", 4) == [0, 1, 3]
    assert parse_shards(" 2 ", 4) == [2]
    # A StatefulSet pod takes every R-th shard from its ordinal.
    assert parse_shards("pod:3", 8, hostname="vicar-worker-1") == [1, 4, 7]
    assert parse_shards("pod:3", 8, hostname="vicar-worker-0") == [0, 3, 6]
    for bad in ("4", "2-1", "x", "pod:0", "1-9"):
        with pytest.raises(InvalidInput):
            parse_shards(bad, 4)
    with pytest.raises(InvalidInput, match="no pod ordinal"):
        parse_shards("pod:2", 4, hostname="laptop")
    with pytest.raises(InvalidInput, match="not below"):
        parse_shards("pod:2", 4, hostname="vicar-worker-2")
    assert parse_count(None) is None and parse_count("") is None and parse_count("6") == 6
    for bad in ("0", "-1", "two", "100000"):
        with pytest.raises(InvalidInput):
            parse_count(bad)


def test_shard_of_is_stable_and_spreads():
    # Stable across processes (not Python's salted hash): the same value every run.
    assert shard_of("alice", 6) == shard_of("alice", 6)
    counts = [0] * 6
    for i in range(600):
        counts[shard_of(f"principal-{i}", 6)] += 1
    assert min(counts) > 60, counts  # about 100 each


# Gates a principal gets before the proxy must answer alone: a bound, not the count. At the
# tests' loose target the betting rule proved the context with the 9th gate (measured
# after 50393f8; the earlier rule did with the 4th).
LEARNED_WITHIN = 14


async def test_a_sharded_worker_routes_every_memory_step_to_the_principals_shard(temporal_env, embedder, settings):
    """All shards in one process (a WorkerGroup): gates work as unsharded, the brain
    records the shard, and each shard queue ran only its own principals' work."""
    from vicar.worker import build_worker

    settings = sharded(settings, 3)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    seen: dict[str, set[tuple[str, str]]] = {}  # principal -> (activity, task queue) in its gates' histories
    async with worker:
        h = VicarHarness(temporal_env.client, task_queue, registry, settings)
        principals = [h.principal() for _ in range(3)]
        for p in principals:
            results = []
            while len(results) < LEARNED_WITHIN and (not results or results[-1].answered_by.value == "human"):
                req = h.request(p, task_type="docs", artifact=f"Fix typo {len(results)}.")
                results.append(await run_answering(h, req))
            assert [r.n for r in results] == list(range(1, len(results) + 1))
            assert results[-1].answered_by.value == "proxy"  # it learned, through the shard's memory
            status = await temporal_env.client.get_workflow_handle(c.brain_workflow_id(p)).query(
                "status", result_type=BrainStatus
            )
            assert status.shard == shard_of(p, 3)
            queues = set()
            for r in results:
                handle = temporal_env.client.get_workflow_handle(c.gate_workflow_id(r.gate_id))
                async for event in handle.fetch_history_events():
                    if event.HasField("activity_task_scheduled_event_attributes"):
                        attrs = event.activity_task_scheduled_event_attributes
                        queues.add((attrs.activity_type.name, attrs.task_queue.name))
            seen[p] = queues
    registry.close()
    for p, queues in seen.items():
        want = f"{task_queue}-shard-{shard_of(p, 3)}"
        # Telling the webhook of an escalation touches no memory: any worker, shared queue.
        assert {q for name, q in queues if name == c.NOTIFY} <= {task_queue}, (p, queues)
        assert {q for name, q in queues if name != c.NOTIFY} == {want}, (p, queues)
        assert {"consult", "record_outcome", c.LOOK_UP_AND_PIN} <= {name for name, _ in queues}


async def test_a_shard_without_its_owner_escalates_and_records_once_it_is_back(temporal_env, embedder, settings):
    """Only the other shards are served: that principal's gate escalates with
    proxy_error ("memory shard k unavailable") within the bounded wait while another
    principal's gates go on; the human's answer waits and lands when the owner comes."""
    from vicar.worker import build_worker

    settings = sharded(settings, 2, shard_wait=2.0)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    h = VicarHarness(temporal_env.client, task_queue, registry, settings)
    down = next(p for p in (f"sh-{i}" for i in range(100)) if shard_of(p, 2) == 1)
    up = next(p for p in (f"sh-{i}" for i in range(100)) if shard_of(p, 2) == 0)
    let_test_responders_in(settings.principals_dir, down, up)
    half, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue, shards=[0])
    async with half:
        req = h.request(down)
        handle = await temporal_env.client.start_workflow(
            c.GATE_WORKFLOW, req, id=c.gate_workflow_id(req.gate_id), task_queue=task_queue, result_type=GateResult
        )
        d = await wait_proxy_error(temporal_env.client, req.gate_id, timeout=40)
        assert "memory shard 1 unavailable" in d.calibration_note, d
        other = await run_answering(h, h.request(up, escalation_mode="never"))
        assert other.n == 1 and other.calibration_guard != "proxy_error"
        # Who may answer is in the memory too: unknown while its shard is down, so
        # nobody may (fail closed) ...
        with pytest.raises(Conflict, match="memory shard 1 unavailable"):
            await answer_gate(
                temporal_env.client, req.gate_id, HumanAnswer(action="correct", text="No.", responder="tester")
            )
    # ... until the owner of shard 1 starts (here: a worker serving it). The gate reads
    # the list again at once, takes the answer and records it.
    rest, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue, shards=[0, 1])
    async with rest:

        async def answered():
            try:
                return await answer_gate(
                    temporal_env.client,
                    req.gate_id,
                    HumanAnswer(action="correct", text="Add a rollback step.", responder="tester"),
                )
            except Conflict:
                return None

        await wait_for(answered, timeout=30, interval=0.5)
        result = await asyncio.wait_for(handle.result(), timeout=90)
        assert result.answered_by.value == "human" and result.action.value == "correct" and result.n == 1
        assert registry.get(down).stats().human_answered == 1
    registry.close()


async def test_a_principal_moves_to_another_shard_with_its_memory(temporal_env, embedder, settings, tmp_path):
    """Two workers with their own data directories (in one process here; the SIGKILL of
    one mid-move is in test_multiworker.py): the memory goes to the new owner, verified,
    the old copy goes, and the next gate runs on the new shard with what was learned."""
    from vicar.models import GateResult

    two = await two_homes(temporal_env, embedder, settings, tmp_path, "mv")
    base, task_queue, homes, registries, groups, p = two
    async with groups[0], groups[1]:
        h = VicarHarness(temporal_env.client, task_queue, registries[0], base)
        before = [await run_answering(h, h.request(p, task_type="docs", artifact=f"Fix typo {i}.")) for i in range(3)]
        assert (homes[0].principals_dir / p / "memory.db").exists()
        report = await move(temporal_env.client, p, task_queue)
        assert report.moved and (report.from_shard, report.to_shard) == (0, 1) and report.outcomes == 3
        assert not (homes[0].principals_dir / p).exists()
        assert registries[1].get(p).stats().human_answered == before[-1].n - sum(not r.escalated for r in before)
        status = await temporal_env.client.get_workflow_handle(c.brain_workflow_id(p)).query(
            "status", result_type=BrainStatus
        )
        assert status.shard == 1
        after = await run_answering(h, h.request(p, task_type="docs", artifact="Fix typo 3."))
        assert isinstance(after, GateResult) and after.n > before[-1].n
        assert registries[1].get(p).store.outcome_seq(c.gate_workflow_id(after.gate_id)) is not None
        assert not (homes[0].principals_dir / p).exists()
        # Moving it where it is: nothing to do.
        again = await move(temporal_env.client, p, task_queue, id_suffix="-again")
        assert not again.moved
    two.close()


# `python -m vicar.worker` with an atexit hook that tells whether the interpreter's
# teardown ran: with the SDK's native threads still up, that teardown now and then
# aborted a refused worker (SIGABRT, "PyGILState_Release", exit -6 instead of 5).
AS_THE_WORKER = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('torn down', file=sys.stderr, flush=True))\n"
    "runpy.run_module('vicar.worker', run_name='__main__', alter_sys=True)\n"
)


async def test_a_second_machine_on_a_served_shard_is_refused(temporal_env, tmp_path):
    """Two real worker processes with their own data directories (two machines) and the
    same shard: the second sees the first's polls at the server and stops in one line
    (exit 5) before polling; the first, restarted under the same identity (its host and
    directory), is not refused by its own last poll. Both ends, refused and stopped,
    skip the interpreter's teardown that could abort them."""
    from vicar.errors import Conflict

    from .conftest import WorkerProcess

    shards = dict(VICAR_SHARD_COUNT="2", VICAR_SHARDS="0")
    first = WorkerProcess(temporal_env, tmp_path / "machine-a", **shards)
    await first.start()
    try:
        await first.until("/readyz", 200)
        second = WorkerProcess(temporal_env, tmp_path / "machine-b", **shards, VICAR_TASK_QUEUE=first.task_queue)
        await second.start("-c", AS_THE_WORKER)
        out = (await asyncio.wait_for(second.proc.communicate(), timeout=90))[0].decode()
        assert second.proc.returncode == Conflict.exit_code, out
        last = out.strip().splitlines()[-1]
        assert last.startswith(f"error: {first.task_queue}-shard-0 is served by another worker") and "machine-a" in last
        assert "Traceback" not in out and "torn down" not in out, out
        # Another shard on the same queue is fine.
        other = WorkerProcess(
            temporal_env,
            tmp_path / "machine-c",
            VICAR_SHARD_COUNT="2",
            VICAR_SHARDS="1",
            VICAR_TASK_QUEUE=first.task_queue,
        )
        await other.start()
        await other.until("/readyz", 200)
        await other.stop()
    finally:
        await first.stop()
    again = WorkerProcess(temporal_env, tmp_path / "machine-a", **shards, VICAR_TASK_QUEUE=first.task_queue)
    await again.start("-c", AS_THE_WORKER)
    await again.until("/readyz", 200)
    assert again.proc.returncode is None
    out = await again.stop()
    assert again.proc.returncode == 0 and "torn down" not in out, out


async def test_the_move_command_with_one_worker_on_every_shard_keeps_the_memory(temporal_env, tmp_path):
    """Issue 24 item 2, as reported: a real worker process serving every shard (the
    default `--shards all`) and `vicar principal move P --to-shard K` printed "moved … the
    old copy is removed" with principals/P gone. Source and destination are one
    directory: the memory stays, whole, and the next gate uses it on shard K."""
    import sqlite3
    import sys

    from vicar.client.gates import start_gate

    from .conftest import ROOT, WorkerProcess
    from .test_ops import gate

    data_dir = tmp_path / "one-worker"
    worker = WorkerProcess(temporal_env, data_dir, VICAR_SHARD_COUNT="2")
    await worker.start()
    try:
        await worker.until("/readyz", 200)
        p = next(q for q in (f"cli-mv-{uuid.uuid4().hex[:6]}-{i}" for i in range(100)) if shard_of(q, 2) == 0)
        first = await (await start_gate(temporal_env.client, gate(p, "never"), worker.task_queue)).result()
        move = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vicar.cli",
            "principal",
            "move",
            p,
            "--to-shard",
            "1",
            env=worker.env,
            cwd=str(ROOT),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(move.communicate(), timeout=120)
        assert move.returncode == 0, err.decode()
        assert "moved" in out.decode()
        db = data_dir / "principals" / p / "memory.db"
        assert db.is_file(), "the move deleted the only copy"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            assert con.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 1
        finally:
            con.close()
        status = await temporal_env.client.get_workflow_handle(c.brain_workflow_id(p)).query(
            "status", result_type=BrainStatus
        )
        assert status.shard == 1
        second = await asyncio.wait_for(
            (await start_gate(temporal_env.client, gate(p, "never"), worker.task_queue)).result(), timeout=90
        )
        assert second.n > first.n
        assert not list((data_dir / "moves").iterdir())
    finally:
        await worker.stop()


async def test_a_sharded_worker_keeps_an_escalated_gates_file_excerpts(temporal_env, embedder, settings, tmp_path):
    """The excerpts activity runs on a sharded worker's shared queue, which has no thread
    pool for sync activities: a sync one stopped every sharded worker from starting."""
    from vicar.client import get_gate
    from vicar.client.gates import start_gate
    from vicar.worker import build_worker

    from .conftest import wait_escalated

    (tmp_path / "art").mkdir()
    notes = tmp_path / "art" / "plan.md"
    notes.write_text("Step 1: back up the users table.\n")
    settings = sharded(settings, 2).model_copy(update=dict(artifact_roots=[tmp_path / "art"]))
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    async with worker:
        h = VicarHarness(temporal_env.client, task_queue, registry, settings)
        req = h.request(h.principal(), escalation_mode="always", artifact_paths=[str(notes)])
        handle = await start_gate(h.client, req, task_queue)
        await wait_escalated(h.client, req.gate_id)
        view = await (await get_gate(h.client, req.gate_id)).view()
        [kept] = view.artifact_files
        assert kept.excerpt == notes.read_text() and not kept.error
        await handle.terminate(reason="test: done")
