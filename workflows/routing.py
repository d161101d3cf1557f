"""Running an activity that touches a principal's memory from workflow code: on the
shard's task queue, so only the worker process that holds the memory runs it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from vicar.errors import STORE_UNAVAILABLE
    from vicar.runtime.sharding import shard_queue


async def run_memory_activity(
    name: str,
    arg,
    result_type,
    options: dict,
    *,
    shard: int | None,
    wait_seconds: float | None = None,
    local: bool = False,
):
    """Unsharded (shard None): on this worker, as a local activity if `local`. Sharded: a
    regular activity on the shard's queue. With `wait_seconds`, a shard whose owner takes
    no work for that long (down, or not deployed) fails the step as unavailable memory,
    non-retryable, so the caller's usual path for a broken memory takes over; without it,
    the step waits for the owner however long (work that must not be lost)."""
    if shard is None:
        if local:
            return await workflow.execute_local_activity(name, arg, result_type=result_type, **options)
        return await workflow.execute_activity(name, arg, result_type=result_type, **options)
    extra: dict[str, Any] = {"schedule_to_start_timeout": timedelta(seconds=wait_seconds)} if wait_seconds else {}
    try:
        return await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            task_queue=shard_queue(workflow.info().task_queue, shard),
            **extra,
            **options,
        )
    except ActivityError as exc:
        cause = exc.cause
        if isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
            raise ApplicationError(
                f"memory unavailable: memory shard {shard} unavailable (no worker took its work in "
                f"{wait_seconds:.0f} s)",
                type=STORE_UNAVAILABLE,
                non_retryable=True,
            ) from None
        raise
