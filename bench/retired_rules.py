"""Retired autonomy rules, kept for the benchmarks that compare them with the shipped one
(vicar/proxy/autonomy/): the fixed-n Clopper-Pearson rule over a sliding window, and the
union bound over geometrically spaced re-checks ("spending"). Neither is valid when
re-read after every answer as the product does (tests/test_sequential.py shows it);
nothing in the product imports this file.

The Clopper-Pearson rule, as it shipped before the betting rule:

Every human-answered gate gives a pair (the proxy's score for it, whether its would-be
answer was right). Over the latest pairs, the rule tests score thresholds from the
highest down (fixed-sequence testing, Learn-then-Test) and keeps the lowest one reached
before the first whose one-sided Clopper-Pearson upper bound on the error rate of the
pairs scoring >= it exceeds the target, at confidence 1 - delta. Pure: the calibrate
step and the replay call the same functions.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Iterable

import numpy as np
from scipy import special

from vicar.models import AutonomyRule


def upper_bound(errors: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial error rate (k errors in n):
    the beta quantile `scipy.stats.beta.ppf(1 - delta, k + 1, n - k)`, called through
    scipy.special (the same function without the 1 ms of the stats wrapper)."""
    if n <= 0 or errors >= n:
        return 1.0  # no evidence, or every answer wrong: nothing below 1 is proven
    return float(special.betaincinv(errors + 1, n - errors, 1.0 - delta))


@functools.lru_cache(maxsize=32)
def required_answers(target: float, delta: float, most: int) -> np.ndarray:
    """For k = 0..most errors, the fewest answers n whose bound is <= target.

    The bound falls as n grows with k fixed, and bound <= target is the same as
    P(Bin(n, target) <= k) <= delta; the binomial's inverse in n gives the boundary,
    checked on both sides. Once per parameter set: after it, a threshold search is
    integer comparisons.
    """
    k = np.arange(most + 1)
    with np.errstate(all="ignore"):
        raw = special.bdtrin(k, delta, target)
    n = np.where(np.isfinite(raw), np.ceil(raw), np.inf)
    n = np.minimum(np.maximum(n, k + 1), np.iinfo(np.int64).max // 2).astype(np.int64)
    n += special.bdtr(k, n, target) > delta  # ceil fell just short
    lower = np.maximum(n - 1, k + 1)
    n = np.where((lower < n) & (special.bdtr(k, lower, target) <= delta), lower, n)
    return n


def find_threshold(
    scores: Iterable[float], correct: Iterable[bool], target: float, delta: float, audit_share: float = 0.0
) -> AutonomyRule:
    """The lowest threshold t (ties included: score >= t) the fixed sequence reaches.

    One sort, then `search`: O(W log W) in all.
    """
    s = np.asarray(list(scores), dtype=float)
    wrong = ~np.asarray(list(correct), dtype=bool)
    order = np.argsort(-s, kind="stable")
    return search(s[order], wrong[order], target, delta, audit_share)


def search(
    scores: np.ndarray,
    wrong: np.ndarray,
    target: float,
    delta: float,
    audit_share: float = 0.0,
    most: int | None = None,
    start: int = 0,
    starts: tuple[float, ...] = (1.0,),
) -> AutonomyRule:
    """`find_threshold` over pairs already sorted by score, highest first: one cumulative
    sum, and each candidate threshold is one comparison with the answers its error count
    needs (`required_answers`, for up to `most` pairs: a window passes its size, so a
    growing window does not compute them again at every length); the beta quantile is
    computed once, for the reported bound. `start`: the fewest pairs a threshold needs
    to be tested at all (default: the fewest a spotless record passes on).

    `starts`: score levels fixed in advance, each the top of its own fixed sequence
    tested at delta / len(starts) (Bonferroni over the sequences); the lowest threshold
    any of them reaches. One start (1.0) is plain fixed-sequence testing; more let a
    sequence begin below an overconfident top bin, which would end a single one at once."""
    base = dict(target=target, delta=delta, audit_share=audit_share)
    if not len(scores):
        return AutonomyRule(**base)
    errors = np.cumsum(wrong)
    # A threshold takes every pair scoring at or above it: candidates end a run of ties.
    ends = np.flatnonzero(np.append(scores[1:] != scores[:-1], True))
    n = ends + 1
    k = errors[ends]
    each = delta / len(starts)
    need = required_answers(target, each, max(most or 0, len(scores)))
    proven, testable = n >= need[k], n >= max(need[0], start)
    best = None
    for level in starts:
        below = scores[ends] <= level + 1e-12
        i = fixed_sequence(proven & below, testable & below)
        if i is not None and (best is None or i > best):
            best = i
    if best is not None:
        nk, kk = int(n[best]), int(k[best])
        return AutonomyRule(
            threshold=float(scores[ends[best]]), bound=upper_bound(kk, nk, each), evidence=nk, errors=kk, **base
        )
    total, wrong_total = len(scores), int(errors[-1])
    return AutonomyRule(bound=upper_bound(wrong_total, total, delta), evidence=total, errors=wrong_total, **base)


def start_pairs(target: float, delta: float, rate: float) -> int:
    """The fewest pairs on which an error at `rate` of the target passes the bound (a
    sequence start chosen on counts alone)."""
    for n in range(1, 1_000_000):
        if upper_bound(int(rate * target * n), n, delta) <= target:
            return n
    return 1_000_000


def fixed_sequence(proven: np.ndarray, testable: np.ndarray) -> int | None:
    """Learn-then-Test's fixed-sequence step over candidates ordered highest first: from
    the first testable one (enough pairs that a pass is possible at all: a choice made on
    the scores' counts, never on a label) down, the last before the first failure.
    Each candidate is tested at the full delta and yet the family's error stays within
    delta: a wrong pass needs the first false hypothesis in the sequence to pass. Taking
    the lowest passing threshold anywhere (the rule before) needs a correction for all
    the thresholds tried, which it did not make."""
    start = np.flatnonzero(testable)
    if not len(start):
        return None
    first = int(start[0])
    fails = np.flatnonzero(~proven[first:])
    last = first + (int(fails[0]) if len(fails) else len(proven) - first) - 1
    return last if last >= first else None


class PairWindow:
    """The latest `size` pairs of one pool, kept sorted by score as they come and go (a
    new pair is an O(W) insert, not a new sort), with the rules they prove cached until
    a new pair arrives."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.last_seq = 0
        self._arrivals: deque[tuple[float, bool]] = deque()  # (score, wrong), oldest first
        self._neg = np.empty(0)  # -score, ascending: the scores highest first
        self._wrong = np.empty(0, dtype=bool)
        self._rules: dict[tuple, AutonomyRule] = {}

    def extend(self, rows: Iterable[tuple[int, float, bool]]) -> None:
        """Pairs (seq, score, correct) newer than `last_seq`, oldest first."""
        rows = list(rows)
        if not rows:
            return
        self._rules.clear()
        self.last_seq = rows[-1][0]
        if len(rows) > 8 or not self._arrivals:
            self._arrivals.extend((float(score), not ok) for _, score, ok in rows)
            while len(self._arrivals) > self.size:
                self._arrivals.popleft()
            neg = -np.fromiter((sc for sc, _ in self._arrivals), float, len(self._arrivals))
            order = np.argsort(neg, kind="stable")
            self._neg = neg[order]
            self._wrong = np.fromiter((w for _, w in self._arrivals), bool, len(self._arrivals))[order]
            return
        for _, score, ok in rows:
            if len(self._arrivals) == self.size:
                self._drop(*self._arrivals.popleft())
            self._arrivals.append((float(score), not ok))
            i = int(np.searchsorted(self._neg, -float(score)))
            self._neg = np.insert(self._neg, i, -float(score))
            self._wrong = np.insert(self._wrong, i, not ok)

    def _drop(self, score: float, wrong: bool) -> None:
        lo = int(np.searchsorted(self._neg, -score, side="left"))
        hi = int(np.searchsorted(self._neg, -score, side="right"))
        # Any pair of the same score and outcome will do: they are indistinguishable.
        i = lo + int(np.flatnonzero(self._wrong[lo:hi] == wrong)[0])
        self._neg = np.delete(self._neg, i)
        self._wrong = np.delete(self._wrong, i)

    def rule(self, target: float, delta: float, audit_share: float, starts: tuple[float, ...] = (1.0,)) -> AutonomyRule:
        key = (target, delta, audit_share, starts)
        if key not in self._rules:
            self._rules[key] = search(
                -self._neg, self._wrong, target, delta, audit_share, most=self.size, starts=starts
            )
        return self._rules[key]


def spent_delta(delta: float, check: int) -> float:
    """The confidence spent at re-check `check` (0, 1, ...): they sum to delta."""
    return delta / ((check + 1) * (check + 2))


def check_index(count: int, first: int, ratio: float) -> int | None:
    """The geometric re-check an evidence count has reached: the j with
    first * ratio**j <= count; None before the first."""
    if count < first:
        return None
    return int(math.floor(math.log(count / first) / math.log(ratio) + 1e-12))
