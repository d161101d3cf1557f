"""Two workers must never serve one shard: each would hold its own copy of the shard's
memories and Temporal would split the principals' work between them. The lock file
(vicar/locks.py) stops a second worker on the same data directory; workers on other
machines (other directories) are seen by Temporal instead: before polling, a worker asks
the server who has polled its shard queues lately and refuses to start beside another.

A worker's identity is stable across restarts (host and data directory, not the pid),
so the same worker restarted after a crash is not refused by its own last poll.
"""

from __future__ import annotations

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


def worker_identity(data_dir: Path) -> str:
    return f"vicar@{socket.gethostname()}:{data_dir.resolve()}"


async def check_claims(client: Client, queues: list[str], identity: str, window: float = CLAIM_WINDOW_SECONDS) -> None:
    """Raise Conflict if another worker polled one of these shard queues within `window` s."""
    now = time.time()
    for queue in queues:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        for poller in resp.pollers:
            age = now - poller.last_access_time.ToSeconds()
            if poller.identity != identity and age < window:
                raise Conflict(
                    f"{queue} is served by another worker ({poller.identity}, polled {age:.0f} s ago): two "
                    f"workers on one shard would split its principals' memories. Give this worker other "
                    f"shards (VICAR_SHARDS), or if that worker is gone for good, start again in "
                    f"{window - age:.0f} s"
                )
