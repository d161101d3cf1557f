"""Two workers must never hold copies of one memory: each would keep its own copy of the
principals' memories (and allow-lists) and Temporal would split the principals' work
between them. The lock file (vicar/runtime/locks.py) stops a second worker on the same data
directory; workers on other machines (other directories) are seen by Temporal instead:
before polling, a worker asks the server who has polled its queues lately and refuses to
start beside

- another unsharded worker on its task queue (unsharded, the shared queue's activities
  are the memory's: two such workers split every principal's memory, and an allow-list
  kept in only one of their data directories fails open on the other);
- a worker with another shard count, or unsharded beside sharded: the newcomer would place
  new principals on shards the others do not have, so they would disagree on where a
  principal's memory lives;
- another worker on one of its shard queues.

A worker's identity is stable across restarts (host and data directory, not the pid), so
the same worker restarted after a crash is not refused by its own last poll; it also says
the worker's shard count, which is how the others learn it.

Workers started in the same second both find nobody polling: each also announces its
claim before it serves (`Announcement`, below), and the later of two that clash stops.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, PollActivityTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

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


# Two workers that start within the same second both ask before either polls, and both
# see nobody. So each also announces itself before it serves: a long poll on a queue no
# task is ever sent to, under an identity that says when it started and which shards it
# takes. Of two announced workers that may not serve together, the later (by start time,
# then name) stops; the earlier serves. A worker keeps looking while it runs, for one that
# announced itself too late to be seen at its start.
CLAIMS_SUFFIX = "-vicar-claims"
SETTLE_SECONDS = 1.5  # after its own announcement is seen: time for a racing one's to be seen too
LOOK_EVERY_SECONDS = 5.0
_CLAIM = re.compile(r"^(.*)\|since=(\d+)\|serves=([\d,]*)$")


class Claim(NamedTuple):
    identity: str  # the worker's (worker_identity)
    since: int  # when it started announcing, ns since the epoch
    shards: frozenset[int]  # the shards it serves (none: unsharded)

    @property
    def name(self) -> str:
        return f"{self.identity}|since={self.since}|serves={','.join(map(str, sorted(self.shards)))}"

    def first(self) -> tuple[int, str]:
        return (self.since, self.identity)

    def clash(self, other: Claim) -> str | None:
        """Why the two may not serve one queue together (None: they may)."""
        (me, mine), (who, theirs) = _split(self.identity), _split(other.identity)
        if me == who:
            return None  # the same worker, restarted
        if mine != theirs:
            return f"it is {_count_words(theirs or UNSHARDED)} and this one {_count_words(mine or UNSHARDED)}"
        if mine == UNSHARDED:
            return "two unsharded workers would each hold a copy of every principal's memory"
        if both := sorted(self.shards & other.shards):
            return f"both would serve shard {', '.join(map(str, both))}"
        return None


def _claim(name: str) -> Claim | None:
    m = _CLAIM.match(name)
    if not m:
        return None
    return Claim(m.group(1), int(m.group(2)), frozenset(int(k) for k in m.group(3).split(",") if k))


class Announcement:
    """This worker's claim on its task queue, announced for as long as it runs."""

    def __init__(self, client: Client, task_queue: str, identity: str, shards: list[int]) -> None:
        self.client, self.task_queue = client, task_queue
        self.queue = task_queue + CLAIMS_SUFFIX
        self.me = Claim(identity, time.time_ns(), frozenset(shards))
        self._polling: asyncio.Task | None = None

    async def __aenter__(self) -> Announcement:
        self._polling = asyncio.ensure_future(self._poll())
        deadline = time.monotonic() + 15
        while self.me.name not in [name for name, _ in await _pollers(self.client, self.queue, CLAIM_WINDOW_SECONDS)]:
            if time.monotonic() > deadline:
                break  # not seen yet: the looks while it runs still find a rival
            await asyncio.sleep(0.1)
        await asyncio.sleep(SETTLE_SECONDS)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._polling:
            self._polling.cancel()

    async def _poll(self) -> None:
        request = PollActivityTaskQueueRequest(
            namespace=self.client.namespace, task_queue=TaskQueue(name=self.queue), identity=self.me.name
        )
        while True:
            try:  # a long poll: answered empty after a minute, then asked again
                await self.client.workflow_service.poll_activity_task_queue(request, timeout=timedelta(seconds=70))
            except RPCError:
                await asyncio.sleep(1.0)  # Temporal away: announced again once it is back

    async def check(self) -> None:
        """Raise Conflict if an earlier worker announced a claim this one's clashes with."""
        for name, age in await _pollers(self.client, self.queue, CLAIM_WINDOW_SECONDS):
            other = _claim(name)
            if other is None or other.first() >= self.me.first():
                continue
            if why := self.me.clash(other):
                raise Conflict(
                    f"{self.task_queue} was claimed by another worker started at the same time ({other.identity}, "
                    f"seen {age:.0f} s ago): {why}. This one stops; run one of them, or give them other "
                    f"shards (VICAR_SHARDS) or the same VICAR_SHARD_COUNT"
                )

    async def lost(self) -> Conflict:
        """Look while the worker runs; returns the Conflict once an earlier rival shows."""
        while True:
            await asyncio.sleep(LOOK_EVERY_SECONDS)
            try:
                await self.check()
            except Conflict as exc:
                return exc
            except RPCError:
                continue  # Temporal away: looked at again later
