"""Where a principal's memory is, for work that starts outside the brain's turn."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError

from vicar import contracts as c
from vicar.models.brain import BrainStatus
from vicar.runtime.sharding import shard_of
from vicar.settings import Settings


async def locate(client: Client, settings: Settings, principal: str) -> int | None:
    """The shard the principal's brain records (a moved principal's new one); before any
    brain, the shard it will start on. None unsharded."""
    if settings.shard_count is None:
        return None
    try:
        status = await client.get_workflow_handle(c.brain_workflow_id(principal)).query(
            c.BRAIN_STATUS_QUERY, result_type=BrainStatus
        )
        if status.shard is not None:
            return status.shard
    except RPCError:
        pass  # no brain yet
    return shard_of(principal, settings.shard_count)
