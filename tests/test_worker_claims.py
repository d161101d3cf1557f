"""Workers on other machines (their own data directories) that must not serve one task
queue together, as real worker processes on one Temporal server (issue 34 items 8, 9).

- Two unsharded workers on one queue each held a copy of the memories: a principal's
  answers split between them, and the allow-list, present in only one directory, failed
  open in the other. The second is refused, as a second worker on a shard already was.
- A worker with VICAR_SHARD_COUNT=3 beside two count-2 workers placed new principals on
  shard 2 of 3, which nobody else has; an unsharded worker beside sharded ones is the same
  disagreement. The newcomer is refused.

Each refusal is one line and exit code 5 before polling; the worker restarted on its own
directory is not refused by its own last poll.

Marked `soak` (several worker processes): `pytest` (and CI) runs it once; `pytest -m "not
soak"` skips it."""

from __future__ import annotations

import asyncio

import pytest

from vicar.errors import Conflict

from .conftest import WorkerProcess
from .test_shards import AS_THE_WORKER

pytestmark = pytest.mark.soak


async def refused_or_serving(worker: WorkerProcess, timeout: float = 120.0) -> str:
    """Start the worker; its last line if it exits, or 'serving' once /readyz says 200."""
    await worker.start("-c", AS_THE_WORKER)
    assert worker.proc is not None
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if worker.proc.returncode is not None:
            out = (await worker.proc.stdout.read()).decode() if worker.proc.stdout else ""
            assert worker.proc.returncode == Conflict.exit_code, out
            assert "Traceback" not in out and "torn down" not in out, out
            return out.strip().splitlines()[-1]
        if (await worker.get("/readyz"))[0] == 200:
            return "serving"
        await asyncio.sleep(0.2)
    raise AssertionError("the worker neither served nor stopped")


async def test_a_second_unsharded_worker_on_the_queue_is_refused(temporal_env, tmp_path):
    first = WorkerProcess(temporal_env, tmp_path / "machine-a")
    await first.start()
    second = None
    try:
        await first.until("/readyz", 200)
        second = WorkerProcess(temporal_env, tmp_path / "machine-b", VICAR_TASK_QUEUE=first.task_queue)
        last = await refused_or_serving(second)
        assert last.startswith(f"error: {first.task_queue} is served by another worker"), last
        assert "machine-a" in last and "unsharded" in last, last
    finally:
        if second and second.proc and second.proc.returncode is None:
            await second.stop()
        await first.stop()
    # The first, restarted on its directory, is not refused by its own last poll.
    again = WorkerProcess(temporal_env, tmp_path / "machine-a", VICAR_TASK_QUEUE=first.task_queue)
    assert await refused_or_serving(again) == "serving"
    await again.stop()


async def test_a_worker_with_another_shard_count_is_refused(temporal_env, tmp_path):
    a = WorkerProcess(temporal_env, tmp_path / "machine-a", VICAR_SHARD_COUNT="2", VICAR_SHARDS="0")
    queue = dict(VICAR_TASK_QUEUE=a.task_queue)
    b = WorkerProcess(temporal_env, tmp_path / "machine-b", VICAR_SHARD_COUNT="2", VICAR_SHARDS="1", **queue)
    others: list[WorkerProcess] = []
    try:
        await a.start()
        await a.until("/readyz", 200)
        assert await refused_or_serving(b) == "serving"  # the same count, another shard: fine

        three = WorkerProcess(temporal_env, tmp_path / "machine-c", VICAR_SHARD_COUNT="3", VICAR_SHARDS="2", **queue)
        others.append(three)
        last = await refused_or_serving(three)
        assert last.startswith(f"error: {a.task_queue} is served by a worker that is VICAR_SHARD_COUNT=2"), last
        assert "this one is VICAR_SHARD_COUNT=3" in last, last

        unsharded = WorkerProcess(temporal_env, tmp_path / "machine-d", **queue)
        others.append(unsharded)
        last = await refused_or_serving(unsharded)
        assert last.startswith(f"error: {a.task_queue} is served by a worker that is VICAR_SHARD_COUNT=2"), last
        assert "this one is unsharded" in last, last
    finally:
        for w in [*others, b, a]:
            if w.proc and w.proc.returncode is None:
                await w.stop()


async def test_workers_started_in_the_same_second_on_one_queue_do_not_both_serve(temporal_env, tmp_path):
    """Each asked the server who polls its queue before either polled: both saw nobody
    and both served. Now each announces itself first, and the later of two that may not
    serve together stops, in one line: two unsharded, two on one shard, sharded beside
    unsharded."""
    for kind, env_a, env_b in (
        ("unsharded", {}, {}),
        ("one shard", {"VICAR_SHARD_COUNT": "2", "VICAR_SHARDS": "0"}, {"VICAR_SHARD_COUNT": "2", "VICAR_SHARDS": "0"}),
        ("sharded beside unsharded", {}, {"VICAR_SHARD_COUNT": "2", "VICAR_SHARDS": "1"}),
    ):
        a = WorkerProcess(temporal_env, tmp_path / kind / "machine-a", **env_a)
        b = WorkerProcess(temporal_env, tmp_path / kind / "machine-b", VICAR_TASK_QUEUE=a.task_queue, **env_b)
        try:
            got = await asyncio.gather(refused_or_serving(a), refused_or_serving(b))
            assert sorted(got, key=lambda s: s != "serving")[0] == "serving", (kind, got)
            (refused,) = [s for s in got if s != "serving"]
            assert refused.startswith("error: ") and "at the same time" in refused, (kind, refused)
            assert "machine-" in refused, refused
        finally:
            for w in (a, b):
                if w.proc and w.proc.returncode is None:
                    await w.stop()
