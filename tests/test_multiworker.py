"""Three worker processes on loopback, each with its own data directory and one of
three shards, serving 30 principals on one Temporal server.

- The same 12-gate script (the human always approves) asks the human exactly as often
  per principal as one worker does (run first, on a server of its own).
- Then a worker is SIGKILLed mid-run and restarted: every gate completes exactly once,
  N stays gap-free, and each principal's memory lives in exactly one directory (its
  shard's owner's).

Marked `soak`: `pytest` (and CI) runs it once; `pytest -m "not soak"` skips it."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client

from vicar import contracts as c
from vicar.models import GateRequest, GateResult, HumanAnswer
from vicar.runtime.codec import data_converter
from vicar.runtime.server import EmbeddedServer, free_port
from vicar.runtime.sharding import shard_of

from .test_soak import drive_gate

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 3
PRINCIPALS = [f"mw-{i:02d}" for i in range(30)]
SCRIPT = 12  # gates per principal in the comparison
MORE = 4  # gates per principal in the run with a SIGKILL
KILL_AFTER = 40  # completed gates of that run before the kill

pytestmark = pytest.mark.soak

# Deterministic decisions: nothing audited at random, and a rule loose enough that the
# proxy earns autonomy within 12 gates, so a split memory would show in the count.
WORKER_ENV = dict(VICAR_AUTONOMY_AUDIT_SHARE="0", VICAR_AUTONOMY_TARGET_ERROR="0.8")


class Workers:
    """Worker processes on one server, each killable and restartable."""

    def __init__(self, tmp: Path, name: str, count: int, sharded: bool) -> None:
        self.tmp = tmp / name
        self.server = EmbeddedServer(self.tmp / "server", port=free_port(), ui_port=free_port())
        self.count, self.sharded = count, sharded
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.logs: list[Path] = []

    def data_dir(self, i: int) -> Path:
        return self.tmp / f"data-{i}"

    async def start(self) -> None:
        await asyncio.to_thread(self.server.start)
        for i in range(self.count):
            await self.start_worker(i)

    async def start_worker(self, i: int, shards: int = SHARDS, module: tuple[str, ...] = ("vicar.worker",)) -> None:
        log = self.tmp / f"worker-{i}-{len(self.logs)}.log"
        self.logs.append(log)
        env = dict(
            os.environ,
            TEMPORAL_ADDRESS=self.server.address,
            VICAR_DATA_DIR=str(self.data_dir(i)),
            **WORKER_ENV,
        )
        if self.sharded:
            env.update(VICAR_SHARD_COUNT=str(shards), VICAR_SHARDS=str(i))
        with open(log, "wb") as out:
            self.procs[i] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", *module, env=env, cwd=str(ROOT), stdout=out, stderr=out
            )

    async def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        await self.procs[i].wait()

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), timeout=60)
            except TimeoutError:
                proc.kill()
        await asyncio.to_thread(self.server.stop)


async def gate(client: Client, principal: str, i: int, asked: Counter) -> GateResult:
    """One gate of the script; the human approves whenever asked."""
    req = GateRequest(
        principal=principal,
        gate_id=f"{principal}-{i:02d}",
        state="PLAN_ASSERT",
        task_type="docs",
        question="Approve the documentation change?",
        artifact_text=f"Fix typo number {i} in the guide.",
    )
    answer = HumanAnswer(action="approve", text="Fine, ship it.", responder=principal)
    return await drive_gate(client, req, answer, lambda: asked.update([principal]))


async def script(client: Client, first: int, last: int, asked: Counter, done: list) -> dict[str, list[GateResult]]:
    """Each principal's gates first..last-1 in order, the principals at once."""

    async def one(p: str) -> list[GateResult]:
        out = []
        for i in range(first, last):
            out.append(await gate(client, p, i, asked))
            done.append(out[-1])
        return out

    results = await asyncio.gather(*(one(p) for p in PRINCIPALS))
    return dict(zip(PRINCIPALS, results))


async def connect(workers: Workers) -> Client:
    return await Client.connect(workers.server.address, data_converter=data_converter())


async def test_three_sharded_workers_ask_as_one_and_survive_a_sigkill(tmp_path):
    # One worker: how often the script asks each principal.
    one = Workers(tmp_path, "one", 1, sharded=False)
    await one.start()
    try:
        client = await connect(one)
        reference: Counter = Counter()
        await asyncio.wait_for(script(client, 0, SCRIPT, reference, []), timeout=900)
    finally:
        await one.stop()
    assert all(0 < reference[p] < SCRIPT for p in PRINCIPALS), reference  # it learned, and asked first

    three = Workers(tmp_path, "three", SHARDS, sharded=True)
    await three.start()
    try:
        client = await connect(three)
        asked: Counter = Counter()
        first = await asyncio.wait_for(script(client, 0, SCRIPT, asked, []), timeout=900)
        assert asked == reference

        # The same principals go on while the owner of shard 1 is SIGKILLed and restarted.
        done: list[GateResult] = []

        async def fault() -> None:
            while len(done) < KILL_AFTER:
                await asyncio.sleep(0.1)
            await three.kill(1)
            await asyncio.sleep(3)
            await three.start_worker(1)

        more, _ = await asyncio.wait_for(
            asyncio.gather(script(client, SCRIPT, SCRIPT + MORE, Counter(), done), fault()), timeout=900
        )
    finally:
        await three.stop()

    for p in PRINCIPALS:
        results = first[p] + more[p]
        # Every gate once, N gap-free per principal.
        assert [r.n for r in results] == list(range(1, SCRIPT + MORE + 1)), p
        # The memory lives in its shard owner's directory only, with each gate once.
        homes = [i for i in range(SHARDS) if (three.data_dir(i) / "principals" / p).exists()]
        assert homes == [shard_of(p, SHARDS)], (p, homes)
        db = sqlite3.connect(three.data_dir(homes[0]) / "principals" / p / "memory.db")
        try:
            rows = db.execute("SELECT workflow_id FROM outcomes").fetchall()
            assert len(rows) == len(set(rows)) == SCRIPT + MORE, p
        finally:
            db.close()
    for log in three.logs:
        assert "Traceback" not in log.read_text(errors="replace"), log


async def test_a_move_interrupted_by_sigkill_completes_after_restart(tmp_path):
    """Two workers, a shard each. The new owner is SIGKILLed while it writes the
    memory's piece; after its restart the move completes: the memory is on the new
    shard only, whole, and the principal's next gate uses it."""
    workers = Workers(tmp_path, "move", 2, sharded=True)
    await asyncio.to_thread(workers.server.start)
    try:
        for i in range(2):
            # The new owner pauses 5 s before writing each piece, so the kill lands inside the step.
            slow = ("tests.delayed_worker", "--piece-delay", "5")
            await workers.start_worker(i, shards=2, module=slow if i == 1 else ("vicar.worker",))
        client = await connect(workers)
        p = next(q for q in (f"mover-{i}" for i in range(100)) if shard_of(q, 2) == 0)
        asked: Counter = Counter()
        for i in range(3):
            await gate(client, p, i, asked)
        handle = await client.start_workflow(
            c.MOVE_WORKFLOW,
            c.MoveInput(principal=p, to_shard=1),
            id=c.move_workflow_id(p),
            task_queue="vicar",
            result_type=c.MoveReport,
        )
        part = workers.data_dir(1) / "moves"

        async def importing():
            return part.exists()

        await asyncio.wait_for(_until(importing), timeout=120)  # the piece activity sleeps in there
        await workers.kill(1)
        await workers.start_worker(1, shards=2)
        report = await asyncio.wait_for(handle.result(), timeout=240)
        assert report.moved and report.outcomes == 3
        # The kill landed inside the step: it ran again on the restarted owner.
        attempts = [
            e.activity_task_started_event_attributes.attempt
            async for e in handle.fetch_history_events()
            if e.HasField("activity_task_started_event_attributes")
        ]
        assert max(attempts) >= 2, attempts
        assert not (workers.data_dir(0) / "principals" / p).exists()
        after = await asyncio.wait_for(gate(client, p, 3, asked), timeout=120)
        db = sqlite3.connect(workers.data_dir(1) / "principals" / p / "memory.db")
        try:
            rows = {w for (w,) in db.execute("SELECT workflow_id FROM outcomes")}
        finally:
            db.close()
        assert rows == {c.gate_workflow_id(f"{p}-{i:02d}") for i in range(4)}, rows
        assert after.n == 5  # gates 1-3, the move's turn, this gate
    finally:
        await workers.stop()


async def _until(predicate, interval: float = 0.1):
    while not await predicate():
        await asyncio.sleep(interval)
    return True
