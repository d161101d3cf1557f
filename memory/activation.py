"""ACT-R base-level activation in interaction time: B = ln sum_i (N - t_i)^-d."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def base_level(traces: Sequence[int], now: int, decay: float = 0.5, age_floor: float = 1.0) -> float:
    """Exact base-level activation of one chunk; -inf for a chunk with no trace."""
    total = sum(max(now - t, age_floor) ** -decay for t in traces)
    return math.log(total) if total > 0 else -math.inf


def base_levels(
    owner: np.ndarray, trace_n: np.ndarray, n_chunks: int, now: int, decay: float = 0.5,
    age_floor: float = 1.0,
) -> np.ndarray:
    """Exact base-level activation of many chunks at once.

    `owner[i]` is the chunk index (0..n_chunks-1) of trace i and `trace_n[i]` its
    interaction number. bincount rather than reduceat: a chunk with no trace gets a
    zero sum (-> -inf) instead of reduceat's neighbour value.
    """
    ages = np.maximum(now - trace_n.astype(np.float64), age_floor)
    sums = np.bincount(owner, weights=ages ** -decay, minlength=n_chunks)
    with np.errstate(divide="ignore"):
        return np.log(sums)


def retrieval_probability(activation: np.ndarray | float, threshold: float, noise_s: float) -> np.ndarray:
    """ACT-R's 1 / (1 + exp(-(A - tau) / s))."""
    return 1.0 / (1.0 + np.exp(-(np.asarray(activation) - threshold) / noise_s))
