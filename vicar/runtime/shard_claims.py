"""Two workers must never hold copies of one memory: each would keep its own copy of the
principals' memories (and allow-lists) and Temporal would split the principals' work
between them. The lock file (vicar/runtime/locks.py) stops a second worker on the same data
directory; workers on other machines (other directories) are seen by Temporal instead:
before polling, a worker asks the server who has polled its queues lately and refuses to
start beside

- another unsharded worker on its task queue (unsharded, the shared queue's activities
  are the memory's: two such workers split every principal; issue 34 item 8);
- a worker with another shard count, or unsharded beside sharded: the newcomer would place
  new principals on shards the others do not have (item 9);
- another worker on one of its shard queues.

A worker's identity is stable across restarts (host and data directory, not the pid), so
the same worker restarted after a crash is not refused by its own last poll; it also says
the worker's shard count, which is how the others learn it.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from vicar.errors import Conflict

# A live worker's long poll lasts up to about a minute before it polls again, so a
# poller seen this recently may still be alive; an older one is gone.
CLAIM_WINDOW_SECONDS = 90.0
UNSHARDED = "unsharded"
_TAG = re.compile(r"\|(unsharded|shards=(\d+))$")
# The SDK's own identity (`<pid>@<host>`): what a worker of an earlier Vicar, unsharded, used.
_SDK_IDENTITY = re.compile(r"^(\d+)@(.+)$")


def worker_identity(data_dir: Path, shard_count: int | None = None) -> str:
    tag = UNSHARDED if shard_count is None else f"shards={shard_count}"
    return f"vicar@{socket.gethostname()}:{data_dir.resolve()}|{tag}"


def _split(identity: str) -> tuple[str, str | None]:
    """(who: host and directory, its shard count tag or None when it does not say)."""
    m = _TAG.search(identity)
    return (identity[: m.start()], m.group(1)) if m else (identity, None)


def _count_words(tag: str) -> str:
    return "unsharded" if tag == UNSHARDED else f"VICAR_SHARD_COUNT={tag.removeprefix('shards=')}"


def _gone(identity: str) -> bool:
    """An earlier Vicar's worker on this machine (the SDK's `<pid>@<host>`) whose process has
    ended: its last poll is its own past, as when upgrading a worker in place."""
    m = _SDK_IDENTITY.match(identity)
    if not m or m.group(2) != socket.gethostname():
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    return False


async def _pollers(client: Client, queue: str, window: float) -> list[tuple[str, float]]:
    """(identity, seconds since its last poll) of each worker polling the queue's activities lately."""
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    now = time.time()
    out = []
    for poller in resp.pollers:
        age = now - poller.last_access_time.ToSeconds()
        if age < window:
            out.append((poller.identity, age))
    return out


async def check_claims(
    client: Client,
    task_queue: str,
    shard_queues: list[str],
    identity: str,
    window: float = CLAIM_WINDOW_SECONDS,
) -> None:
    """Raise Conflict if another worker polled the shared queue in a way that disagrees with
    this one (see the module's docstring), or polled one of these shard queues, within `window` s."""
    me, mine = _split(identity)
    for other, age in await _pollers(client, task_queue, window):
        who, theirs = _split(other)
        if who == me or _gone(other):
            continue
        again = f"or if that worker is gone for good, start again in {window - age:.0f} s"
        if theirs is not None and mine is not None and theirs != mine:
            raise Conflict(
                f"{task_queue} is served by a worker that is {_count_words(theirs)} ({other}, polled {age:.0f} s "
                f"ago), and this one is {_count_words(mine)}: it would place principals on shards the others do "
                f"not have. Give every worker the same VICAR_SHARD_COUNT, {again}"
            )
        if mine == UNSHARDED:
            raise Conflict(
                f"{task_queue} is served by another worker ({other}, polled {age:.0f} s ago): two unsharded "
                f"workers with their own data directories would each hold a copy of every principal's memory "
                f"and allow-list. Run one unsharded worker per task queue, or shard them (VICAR_SHARD_COUNT, "
                f"the same on every worker), {again}"
            )
    for queue in shard_queues:
        for other, age in await _pollers(client, queue, window):
            if _split(other)[0] != me:
                raise Conflict(
                    f"{queue} is served by another worker ({other}, polled {age:.0f} s ago): two "
                    f"workers on one shard would split its principals' memories. Give this worker other "
                    f"shards (VICAR_SHARDS), or if that worker is gone for good, start again in "
                    f"{window - age:.0f} s"
                )
