"""A token bucket per key (a client address, an account), in bounded memory: at most
`max_keys` buckets, the least recently used dropped first. A dropped bucket starts full
again, so the bound costs an attacker's many addresses a fresh burst each, never memory."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limit:
    burst: int  # spends allowed at once
    per_seconds: float  # the time to refill all of them
    max_keys: int = 10_000  # buckets kept


@dataclass
class Throttle:
    limit: Limit
    _buckets: OrderedDict[str, tuple[float, float]] = field(default_factory=OrderedDict, repr=False)

    @property
    def burst(self) -> int:
        return self.limit.burst

    @property
    def per_seconds(self) -> float:
        return self.limit.per_seconds

    def _level(self, key: str, now: float) -> float:
        held = self._buckets.get(key)
        if held is None:
            return float(self.burst)
        level, at = held
        return min(float(self.burst), level + (now - at) * self.burst / self.per_seconds)

    def wait(self, key: str, now: float | None = None) -> float:
        """Seconds until `key` may spend again (0: now)."""
        now = time.monotonic() if now is None else now
        short = 1.0 - self._level(key, now)
        return 0.0 if short <= 0 else short * self.per_seconds / self.burst

    def spend(self, key: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._buckets[key] = (max(self._level(key, now) - 1.0, 0.0), now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.limit.max_keys:
            self._buckets.popitem(last=False)

    def retry_after(self, key: str) -> int | None:
        """Whole seconds to wait (for a Retry-After header), or None when `key` may go."""
        wait = self.wait(key)
        return math.ceil(wait) if wait > 0 else None

    def __len__(self) -> int:
        return len(self._buckets)
