"""ACT-R base-level activation in interaction time, exact and approximated.

Exact (Anderson & Lebiere 1998):   B = ln sum_i (N - t_i)^-d
Hybrid (Petrov 2006): keep the k most recent traces exactly and integrate the rest
from the chunk's creation, knowing only their count:

    B ~ ln[ sum_{i<=k} a_i^-d + (n - k) (a_n^(1-d) - a_k^(1-d)) / ((1 - d)(a_n - a_k)) ]

where a_i are ages (N - t_i), a_k the age of the oldest kept trace and a_n the age of
the creation trace. Memory per chunk is bounded: k traces, a count and a creation time.

Ages are floored at `age_floor` interactions (default 1): a trace made at the current
N would otherwise have age 0 and an infinite activation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def base_level(traces: Sequence[int], now: int, decay: float = 0.5, age_floor: float = 1.0) -> float:
    """Exact base-level activation of one chunk; -inf for a chunk with no trace."""
    total = sum(max(now - t, age_floor) ** -decay for t in traces)
    return math.log(total) if total > 0 else -math.inf


def base_levels(
    owner: np.ndarray,
    trace_n: np.ndarray,
    n_chunks: int,
    now: int,
    decay: float = 0.5,
    age_floor: float = 1.0,
) -> np.ndarray:
    """Exact base-level activation of many chunks at once.

    `owner[i]` is the chunk index (0..n_chunks-1) of trace i and `trace_n[i]` its
    interaction number. bincount rather than reduceat: a chunk with no trace gets a
    zero sum (-> -inf) instead of reduceat's neighbour value.
    """
    ages = np.maximum(now - trace_n.astype(np.float64), age_floor)
    sums = np.bincount(owner, weights=_neg_power(ages, decay), minlength=n_chunks)
    with np.errstate(divide="ignore"):
        return np.log(sums)


def hybrid_level(
    recent: Sequence[int], count: int, created: int, now: int, decay: float = 0.5, age_floor: float = 1.0
) -> float:
    """Petrov's hybrid for one chunk: `recent` holds its (up to k) most recent traces."""
    if count == 0:
        return -math.inf
    ages = [max(now - t, age_floor) for t in recent]
    total = sum(a**-decay for a in ages)
    rest = count - len(recent)
    if rest > 0:
        a_k, a_n = max(ages), max(now - created, age_floor)
        total += _tail(rest, a_k, a_n, decay)
    return math.log(total)


def _tail(rest, a_k, a_n, decay):
    """Integral estimate of `rest` traces spread evenly between ages a_k and a_n."""
    if a_n - a_k <= 1e-9:
        return rest * a_k**-decay
    return rest * (a_n ** (1 - decay) - a_k ** (1 - decay)) / ((1 - decay) * (a_n - a_k))


def _neg_power(a: np.ndarray, decay: float) -> np.ndarray:
    """a^-d; the common d = 0.5 as 1/sqrt, several times faster than a general power."""
    return 1.0 / np.sqrt(a) if decay == 0.5 else a**-decay


def hybrid_levels(
    recent: np.ndarray,
    count: np.ndarray,
    created: np.ndarray,
    now: int,
    decay: float = 0.5,
    age_floor: float = 1.0,
) -> np.ndarray:
    """Petrov's hybrid for many chunks: `recent` is (chunks x k), each row ascending with
    -1 for empty slots (so a full row's oldest kept trace is in column 0)."""
    # An empty slot gets an infinite age, whose contribution a^-d is exactly 0.
    ages = np.where(recent >= 0, np.maximum(now - recent, age_floor).astype(np.float64), np.inf)
    total = _neg_power(ages, decay).sum(axis=1)
    rest = count - recent.shape[1]
    older = np.flatnonzero(rest > 0)  # only chunks with more traces than slots have a tail
    if len(older):
        a_k = ages[older, 0]
        a_n = np.maximum(now - created[older], age_floor).astype(np.float64)
        r = rest[older]
        span = a_n - a_k
        flat = span <= 1e-9
        safe = np.where(flat, 1.0, span)
        tail = np.where(
            flat, r * _neg_power(a_k, decay), r * (a_n ** (1 - decay) - a_k ** (1 - decay)) / ((1 - decay) * safe)
        )
        total[older] += tail
    with np.errstate(divide="ignore"):
        return np.log(total)


def logistic_noise(rng: np.random.Generator, size: int, s: float) -> np.ndarray:
    """ACT-R's activation noise: logistic with scale s (variance pi^2 s^2 / 3)."""
    if s <= 0:
        return np.zeros(size)
    u = rng.uniform(1e-12, 1 - 1e-12, size)
    return s * np.log(u / (1 - u))


def retrieval_probability(activation: np.ndarray | float, threshold: float, noise_s: float) -> np.ndarray:
    """ACT-R's 1 / (1 + exp(-(A - tau) / s))."""
    return 1.0 / (1.0 + np.exp(-(np.asarray(activation) - threshold) / noise_s))
