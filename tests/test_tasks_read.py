"""A waited call whose cancellation ends in another error (as Temporal's client ends an
update's wait) leaves no "Task exception was never retrieved" when the waiting task is
cancelled (vicar/runtime/tasks.py). Seen in a worker's log in the soak test, from the
turn activity's update wait, when the worker shut down under it."""

from __future__ import annotations

import asyncio
import gc
import logging

from vicar.runtime.tasks import wait_for


class Converted(Exception):
    """What Temporal's client raises where the wait it was in is cancelled."""


async def call_that_converts_its_cancellation() -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        raise Converted("timeout or cancellation waiting for update") from None


async def cancelled_while_waiting(waiter) -> None:
    async def waiting() -> None:
        await waiter(call_that_converts_its_cancellation(), 10)

    task = asyncio.ensure_future(waiting())
    await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(0.05)
    gc.collect()  # an unread task's error is logged when the task is collected
    await asyncio.sleep(0.05)


async def test_a_cancelled_wait_leaves_no_unread_error(caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    await cancelled_while_waiting(wait_for)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_timeout_still_ends_the_call_and_is_said():
    began = asyncio.get_running_loop().time()
    try:
        await wait_for(call_that_converts_its_cancellation(), 0.1)
    except (TimeoutError, Converted):
        pass
    else:
        raise AssertionError("the wait did not end")
    assert asyncio.get_running_loop().time() - began < 5
