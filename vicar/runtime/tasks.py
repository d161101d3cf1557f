"""Awaitables whose failure is always looked at.

Temporal's client turns the cancellation of a call it is waiting on into its own error
(an update's wait ends in WorkflowUpdateRPCTimeoutOrCancelledError, not CancelledError).
When the task awaiting `asyncio.wait_for` is itself cancelled (an activity cancelled as
its worker shuts down, a request dropped), wait_for cancels the inner task and re-raises
CancelledError without reading the inner task's error, and asyncio logs "Task exception
was never retrieved" with its traceback. A failed update-with-start also fails the start
operation's own future, which nobody else awaits. Both are read here, once they end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


def looked_at(aw: Awaitable[T]) -> asyncio.Future[T]:
    """`aw` as a task (or its future) whose outcome is read when it ends."""
    fut = asyncio.ensure_future(aw)
    fut.add_done_callback(_read)
    return fut


def _read(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """asyncio.wait_for, with the inner task's own error read whatever happens to ours."""
    return await asyncio.wait_for(looked_at(aw), timeout)
