"""Two machines in one process (sharded workers, each with its own data directory and
its own client) and a principal's move between shards, as the shard, move and
hostile-path tests and the move history need them. (The multi-process run with real
worker processes is in test_multiworker.py.)"""

from __future__ import annotations

import asyncio
import uuid
from typing import NamedTuple

from temporalio.client import Client, WorkflowHandle

from vicar import contracts as c
from vicar.memory.registry import MemoryRegistry
from vicar.runtime.codec import data_converter
from vicar.runtime.sharding import shard_of
from vicar.settings import Settings


def sharded(settings: Settings, count: int, shard_wait: float = 60.0) -> Settings:
    return settings.model_copy(update=dict(shard_count=count, shard_wait_seconds=shard_wait))


class TwoHomes(NamedTuple):
    """Worker k serves shard k from homes[k]; `principal` is fresh and of shard 0."""

    base: Settings
    task_queue: str
    homes: list[Settings]
    registries: list[MemoryRegistry]
    groups: list
    principal: str

    def let_in(self, principal: str) -> None:
        """The test responders may answer for `principal` (its allow-list, in the home of its shard)."""
        from .conftest import let_test_responders_in

        let_test_responders_in(self.homes[shard_of(principal, 2)].principals_dir, principal)

    def close(self) -> None:
        for r in self.registries:
            r.close()


async def two_homes(temporal_env, embedder, settings: Settings, tmp_path, prefix: str) -> TwoHomes:
    from vicar.worker import build_worker

    base = sharded(settings, 2)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    homes = [base.model_copy(update={"data_dir": tmp_path / f"home-{k}"}) for k in range(2)]
    registries = [MemoryRegistry(s.principals_dir, lambda: embedder, s.memory) for s in homes]
    # A client each, as two processes would have: the SDK allows one worker per task
    # queue and client.
    clients = [
        temporal_env.client,
        await Client.connect(temporal_env.client.service_client.config.target_host, data_converter=data_converter()),
    ]
    groups = [
        build_worker(clients[k], s, registry=r, task_queue=task_queue, shards=[k])[0]
        for k, (s, r) in enumerate(zip(homes, registries))
    ]
    p = next(q for q in (f"{prefix}-{uuid.uuid4().hex[:6]}-{i}" for i in range(100)) if shard_of(q, 2) == 0)
    two = TwoHomes(base, task_queue, homes, registries, groups, p)
    two.let_in(p)
    return two


async def start_move(client: Client, principal: str, task_queue: str, id_suffix: str = "") -> WorkflowHandle:
    """The move of `principal` to shard 1, as `vicar principal move` starts it."""
    return await client.start_workflow(
        c.MOVE_WORKFLOW,
        c.MoveInput(principal=principal, to_shard=1),
        id=c.move_workflow_id(principal) + id_suffix,
        task_queue=task_queue,
        result_type=c.MoveReport,
    )


async def move(client: Client, principal: str, task_queue: str, id_suffix: str = "") -> c.MoveReport:
    return await asyncio.wait_for((await start_move(client, principal, task_queue, id_suffix)).result(), timeout=120)
