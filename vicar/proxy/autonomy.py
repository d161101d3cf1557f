"""The autonomy rule: the proxy answers alone only where a measured bound says its error
is within the target.

Every human-answered gate gives a pair (the proxy's score for it, whether its would-be
answer was right). Over the latest pairs, the rule finds the lowest score threshold t
such that the one-sided Clopper-Pearson upper bound on the error rate of the pairs
scoring >= t is <= the target, at confidence 1 - delta. Pure: the calibrate step and
the replay call the same functions.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable

import numpy as np
from scipy import special, stats

from vicar.models import AutonomyRule


def upper_bound(errors: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial error rate (k errors in n)."""
    if n <= 0 or errors >= n:
        return 1.0  # no evidence, or every answer wrong: nothing below 1 is proven
    return float(stats.beta.ppf(1.0 - delta, errors + 1, n - errors))


def find_threshold(scores: Iterable[float], correct: Iterable[bool], target: float, delta: float,
                   audit_share: float = 0.0) -> AutonomyRule:
    """The lowest threshold t (ties included: score >= t) whose bound is <= target.

    One sort and one cumulative sum, O(W log W). The bound is checked through its dual,
    P(Bin(n, target) <= k) <= delta, vectorised over every candidate threshold; the
    beta quantile is computed once, for the reported bound.
    """
    s = np.asarray(list(scores), dtype=float)
    ok = np.asarray(list(correct), dtype=bool)
    base = dict(target=target, delta=delta, audit_share=audit_share)
    if not len(s):
        return AutonomyRule(**base)
    order = np.argsort(-s, kind="stable")
    s, wrong = s[order], ~ok[order]
    errors = np.cumsum(wrong)
    # A threshold takes every pair scoring at or above it: candidates end a run of ties.
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    n = ends + 1
    k = errors[ends]
    proven = (k < n) & (special.bdtr(k, n, target) <= delta)
    if proven.any():
        i = int(np.flatnonzero(proven)[-1])  # the lowest proven threshold: the most pairs
        nk, kk = int(n[i]), int(k[i])
        return AutonomyRule(threshold=float(s[ends[i]]), bound=upper_bound(kk, nk, delta),
                            evidence=nk, errors=kk, **base)
    total, wrong_total = len(s), int(errors[-1])
    return AutonomyRule(bound=upper_bound(wrong_total, total, delta), evidence=total, errors=wrong_total, **base)


def audit_draw(principal: str, gate_key: str) -> float:
    """A uniform draw in [0, 1) fixed by the gate, so a retried or replayed gate is
    audited (or not) the same way."""
    digest = hashlib.blake2b(f"audit\0{principal}\0{gate_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class PairWindow:
    """The latest `size` pairs of one pool, with the rules they prove cached until a new
    pair arrives: a gate does not sort the window again when nothing changed."""

    def __init__(self, size: int) -> None:
        self.last_seq = 0
        self._scores: deque[float] = deque(maxlen=size)
        self._correct: deque[bool] = deque(maxlen=size)
        self._rules: dict[tuple[float, float, float], AutonomyRule] = {}

    def extend(self, rows: Iterable[tuple[int, float, bool]]) -> None:
        """Pairs (seq, score, correct) newer than `last_seq`, oldest first."""
        for seq, score, correct in rows:
            self._scores.append(score)
            self._correct.append(bool(correct))
            self.last_seq = seq
            self._rules.clear()

    def rule(self, target: float, delta: float, audit_share: float) -> AutonomyRule:
        key = (target, delta, audit_share)
        if key not in self._rules:
            self._rules[key] = find_threshold(self._scores, self._correct, target, delta, audit_share)
        return self._rules[key]
