"""Which worker holds a principal's memory: shards on Temporal task queues.

A principal's memory (records, vectors, index, learned model) lives in one worker
process at a time. The principals are split into a fixed number of shards set at
deploy (`VICAR_SHARD_COUNT`); a worker serves the shards it is given (`--shards`), and
every activity that touches a memory runs on its shard's task queue
(`vicar-shard-<k>`), so Temporal routes
it to the one process that holds it. The brain records its principal's shard (a moved
principal keeps its new one); `shard_of` is only where a new principal starts.

Unset, the worker runs unsharded: one process does everything on the shared queue.
"""

from __future__ import annotations

import hashlib
import re
import socket

from vicar.errors import InvalidInput

# Enough for any deployment this design targets; keeps a typo from starting 10^6 pollers.
MAX_SHARDS = 1024


def shard_queue(task_queue: str, shard: int) -> str:
    """The shard's queue beside the shared one (`vicar` -> `vicar-shard-3`), so two
    deployments on one namespace (or two tests on one server) never share a shard."""
    return f"{task_queue}-shard-{shard}"


def shard_of(principal: str, count: int) -> int:
    """A new principal's shard: a stable hash (Python's hash() is salted per process)."""
    digest = hashlib.blake2b(principal.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def parse_count(raw: str | None) -> int | None:
    """VICAR_SHARD_COUNT: None (unsharded) when unset or empty."""
    if raw is None or not raw.strip():
        return None
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_SHARDS:
        raise InvalidInput(f"VICAR_SHARD_COUNT must be a whole number from 1 to {MAX_SHARDS}, not {raw!r}")
    return int(raw)


def parse_shards(spec: str, count: int, hostname: str | None = None) -> list[int]:
    """The shards a worker serves, from `--shards` / VICAR_SHARDS:

    - `all`: every shard (one worker, the default);
    - `0-3`, `0,2,5`, `0-1,4`: those shards;
    - `pod:R`: a StatefulSet pod of R replicas serves the shards k with k % R == i, i
      being the ordinal at the end of its hostname (`vicar-worker-2` -> 2).
    """
    spec = spec.strip()
    if spec in ("", "all"):
        return list(range(count))
    if spec.startswith("pod:"):
        replicas = spec[4:]
        if not replicas.isdigit() or int(replicas) < 1:
            raise InvalidInput(f"--shards pod:R needs a replica count R >= 1, not {spec!r}")
        host = hostname if hostname is not None else socket.gethostname()
        m = re.search(r"-(\d+)$", host)
        if not m:
            raise InvalidInput(f"--shards {spec}: the hostname {host!r} has no pod ordinal (NAME-<i>)")
        ordinal, r = int(m.group(1)), int(replicas)
        if ordinal >= r:
            raise InvalidInput(f"--shards {spec}: pod ordinal {ordinal} is not below the replica count {r}")
        shards = [k for k in range(count) if k % r == ordinal]
    else:
        shards = []
        for part in spec.split(","):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if not m:
                raise InvalidInput(f"--shards: {part.strip()!r} is not a shard, a range A-B, 'all' or 'pod:R'")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if lo > hi:
                raise InvalidInput(f"--shards: the range {lo}-{hi} is empty")
            if hi >= count:
                raise InvalidInput(f"--shards: shard {hi} does not exist (VICAR_SHARD_COUNT is {count})")
            shards.extend(range(lo, hi + 1))
    if not shards:
        raise InvalidInput(f"--shards {spec}: no shard to serve out of {count}")
    return sorted(set(shards))
