"""The bets behind the autonomy rule: statements that stay valid however often they
are read (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by
betting").

A gambler bets against H0 "the error is >= target" with a predictable stake; the wealth
is a nonnegative supermartingale under H0, so by Ville's inequality it ever reaches
1/delta with probability <= delta. "Error <= target" is stated while the wealth is
>= 1/delta: valid at every moment at once, where a fixed-n bound re-checked after every
answer states it at the first moment the counts happen to dip. Observations may be
inverse-probability weighted (an audit drawn with probability q counts 1/q), which
only bounds them by 1/q instead of 1.

The drift test is the same betting the other way round (H0 "the error is <= target"),
over the audited answers of one context; its wealth reaching 1/delta says the error is
above target, with a false alarm ever at most delta.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from vicar.models import AutonomyRule

# The plug-in error estimate behind each stake: an exponentially weighted mean of the
# recent errors (half-life RECENT observations), starting from PRIOR_N pseudo-observations
# at the target, so a stake follows the recent error rate and hedges to 0 when it
# looks above target: a bad stretch (an early, overconfident model) costs no wealth.
RECENT = 200
PRIOR_N = 10.0
PRIOR_SHARE = 0.5  # the pseudo-observations' error, as a share of the target: the first bets are made
DRIFT_RECENT = 30  # the drift test follows the latest audits closely: it must see a jump soon
STAKE_CAP = 0.9  # of the largest stake keeping the wealth nonnegative
# Kelly's stake at the estimate (a half stake was measured slower to prove 3% error
# against a 5% target: 880 answers against 614, in a simulation, not on the replay).
KELLY = 1.0
# A fixed sequence starts where an error at this share of the target could pass (0: a
# spotless record; the replay's dev figures were the same at 0.3, which needs twice the
# evidence before anything is proven).
START_RATE = 0.0
# Error levels above the target whose bets also run, for the bound stated when nothing
# is proven.
COARSE_LEVELS = (0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
# The tops of the fixed sequences, fixed in advance, each tested at delta / len(STARTS).
# One sequence from the very top ended at once on the replay's dev data, whose top bin
# (scores >= 0.995) is overconfident; four starts cost a quarter of delta each.
STARTS: tuple[float, ...] = (1.0, 0.98, 0.95, 0.9)


def _plug_in(x: np.ndarray, target: float, recent: float = RECENT, observed: np.ndarray | None = None) -> np.ndarray:
    """Predictable estimates: entry i uses observations before i only (those `observed`)."""
    decay = 0.5 ** (1.0 / recent)
    est = np.empty(len(x))
    s, w = PRIOR_N * PRIOR_SHARE * target, PRIOR_N
    for i, xi in enumerate(x):
        est[i] = s / w
        if observed is None or observed[i]:
            s, w = decay * s + xi, decay * w + 1.0
    return est


def betting_log_wealth(
    errors: Sequence[float] | np.ndarray,
    target: float,
    weights: Sequence[float] | np.ndarray | None = None,
    labelled: Sequence[bool] | np.ndarray | None = None,
) -> np.ndarray:
    """Log wealth after each observation of a bet against "error >= target".

    errors: 0/1 per observation; weights: the inverse of each one's labelling
    probability (1 for a gate the human answered anyway), so z = weight * error has
    mean the error rate whatever was sampled; unlabelled gates enter with error 0
    (`labelled` False; all labelled by default). Each factor is 1 + stake * (target - z),
    stake in [0, 1 / (zmax - target)), Kelly's at the plain error of the labelled
    observations so far (BettingLedger says why).
    """
    x = np.asarray(errors, dtype=float)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=float)
    seen = np.ones(len(x), dtype=bool) if labelled is None else np.asarray(labelled, dtype=bool)
    z = x * w
    if not len(z):
        return np.zeros(0)
    zmax = np.maximum(w, 1.0)
    p = _plug_in(x, target, observed=seen)
    # Kelly's stake for z in {0, zmax} at the estimated error (past Kelly the wealth
    # grows slower, not faster), capped below ruin.
    stake = np.clip(KELLY * (target - p) / (target * (zmax - target)), 0.0, STAKE_CAP / (zmax - target))
    return np.cumsum(np.log1p(stake * (target - z)))


def betting_passes(
    errors: Sequence[float] | np.ndarray,
    target: float,
    delta: float,
    weights: Sequence[float] | np.ndarray | None = None,
) -> bool:
    """Whether the bet has, now, the wealth that states "error <= target"."""
    lw = betting_log_wealth(errors, target, weights)
    return bool(len(lw)) and lw[-1] >= math.log(1.0 / delta)


def betting_upper_bound(
    errors: Sequence[float] | np.ndarray,
    delta: float,
    weights: Sequence[float] | np.ndarray | None = None,
    grid: np.ndarray | None = None,
) -> float:
    """The smallest error level m on a grid whose bet "error >= m" has won 1/delta by
    now: the upper end of the confidence sequence at this moment (1.0: none)."""
    grid = np.linspace(0.005, 0.5, 100) if grid is None else grid
    need = math.log(1.0 / delta)
    for m in grid:
        lw = betting_log_wealth(errors, float(m), weights)
        if len(lw) and lw[-1] >= need:
            return float(m)
    return 1.0


def drift_log_wealth(errors: Sequence[float] | np.ndarray, target: float) -> np.ndarray:
    """Log wealth of a bet against "error <= target" over audited answers (0/1 errors),
    each factor 1 + stake * (error - target), stake in [0, 1 / target)."""
    x = np.asarray(errors, dtype=float)
    if not len(x):
        return np.zeros(0)
    p = _plug_in(x, target, DRIFT_RECENT)
    stake = np.clip(KELLY * (p - target) / (target * (1 - target)), 0.0, STAKE_CAP / target)
    return np.cumsum(np.log1p(stake * (x - target)))


def drift_alarm(errors: Sequence[float] | np.ndarray, target: float, delta: float) -> int | None:
    """The index of the audited answer at which the error is shown above target (the
    drift test's first alarm), or None."""
    lw = drift_log_wealth(errors, target)
    hit = np.flatnonzero(lw >= math.log(1.0 / delta))
    return int(hit[0]) if len(hit) else None


# The thresholds a betting rule tests, highest first: fixed in advance (Learn-then-Test
# needs the sequence before the data), 0.995 down to 0.005.
GRID = np.round(np.arange(0.995, 0.0, -0.005), 3)


@functools.lru_cache(maxsize=32)
def fewest_to_prove(target: float, delta: float, rate: float = START_RATE) -> int:
    """The fewest observations on which the bet proves "error <= target" when the error
    runs at `rate` of the target (every 1/(rate * target)-th answer wrong). The fixed
    sequence starts at the highest threshold with this many: a start chosen on counts
    of scores, never on a label, and one where a good threshold can pass (started
    where only a spotless record passes, one early error would end the sequence)."""
    period = round(1.0 / (rate * target)) if rate > 0 else 10**9
    n = 1 + np.arange(100_000)
    lw = betting_log_wealth((n % period == 0).astype(float), target)
    hit = np.flatnonzero(lw >= math.log(1.0 / delta))
    return int(hit[0]) + 1 if len(hit) else 100_000


class BettingLedger:
    """One bet per grid threshold, over the observations scoring at or above it, in
    arrival order, kept incrementally (an observation is O(grid))."""

    def __init__(self, target: float, delta: float, grid: np.ndarray = GRID, start_rate: float = START_RATE) -> None:
        self.target, self.delta, self.grid = target, delta, grid
        # At the confidence each sequence is tested at (delta / len(STARTS)), and never below
        # what a spotless record needs: a threshold tested on fewer fails whatever its
        # labels, and would end its sequence before the thresholds that have the evidence.
        each = delta / len(STARTS)
        self.start = max(fewest_to_prove(target, each, start_rate), fewest_to_prove(target, each, 0.0))
        self.log_wealth = np.zeros(len(grid))
        self.count = np.zeros(len(grid), dtype=np.int64)  # observations, unlabelled draws included
        self.labelled = np.zeros(len(grid), dtype=np.int64)  # the human answers among them: the evidence stated
        self.errors = np.zeros(len(grid))  # inverse-probability weighted
        self._w = np.full(len(grid), PRIOR_N)
        # The stakes' estimate: the plain error of the labelled observations (a human's
        # answer or an audit), not the weighted one, where one wrong audit (z = 1/q = 20)
        # held the estimate above target for about a half-life and every stake at 0 for
        # ~2,000 gates. A stake only has to be predictable for the wealth to stay a
        # nonnegative supermartingale under H0: validity is the same, the wealth grows
        # steadier (bench/score/results/simulate-claims.md, then the replay at five seeds).
        self._sl = np.full(len(grid), PRIOR_N * PRIOR_SHARE * target)
        self._wl = self._w.copy()
        self._decay = 0.5 ** (1.0 / RECENT)
        # The same bets at lower error levels, for the bound stated with a threshold: the
        # lowest level whose bet has won is the confidence sequence's upper end there.
        fine = np.round(np.arange(0.005, max(target, 0.05) + 1e-9, 0.005), 4)
        coarse = [x for x in COARSE_LEVELS if x > target]
        self.levels = np.unique(np.concatenate([fine, [target], coarse]))
        self.level_wealth = np.zeros((len(grid), len(self.levels)))
        self.wrong = np.zeros(len(grid), dtype=np.int64)  # labels, unweighted
        # The wealth the same bets would hold had every observation been right: what the
        # evidence at a threshold could prove, from its scores and weights alone (never a
        # label). A sequence starts where this reaches the need. Unweighted it is a count
        # (self.start observations); a weighted draw (an answer alone, worth 1/q) earns a
        # small safe gain, so a threshold held up only by such draws is not yet testable
        # and does not end the sequence before the thresholds with the evidence.
        self.spotless = np.zeros(len(grid))
        self._s0 = self._sl.copy()
        # The lowest score each bet has seen: a threshold is stated at a score the evidence
        # reaches, never at a grid point below every pair (gates no pair speaks for).
        self.lowest = np.full(len(grid), np.inf)
        # The rule proven, per (audit share, starts), until the next observation: gates
        # read it far more often than their answers change it.
        self._rules: dict[tuple[float, tuple[float, ...]], AutonomyRule] = {}

    def add(self, score: float, error: bool, weight: float = 1.0, labelled: bool = True) -> None:
        """weight: 1 / the probability this gate's label was drawn (1: the human answered
        it anyway). An autonomous gate not audited enters with error False, the audit's
        weight and labelled False: it could have been drawn."""
        t = self.target
        m = self.grid <= score
        if not m.any():
            return
        self._rules.clear()
        zmax = max(weight, 1.0)
        z = weight * float(error)
        p = self._sl[m] / self._wl[m]
        stake = np.clip(KELLY * (t - p) / (t * (zmax - t)), 0.0, STAKE_CAP / (zmax - t))
        self.log_wealth[m] += np.log1p(stake * (t - z))
        lv = self.levels[None, :]
        lstake = np.clip(KELLY * (lv - p[:, None]) / (lv * (zmax - lv)), 0.0, STAKE_CAP / (zmax - lv))
        self.level_wealth[m] += np.log1p(lstake * (lv - z))
        p0 = self._s0[m] / self._w[m]
        stake0 = np.clip(KELLY * (t - p0) / (t * (zmax - t)), 0.0, STAKE_CAP / (zmax - t))
        self.spotless[m] += np.log1p(stake0 * t)
        self._s0[m] = self._decay * self._s0[m]
        self.wrong[m] += int(error and weight > 0)
        self.lowest[m] = np.minimum(self.lowest[m], score)
        self._w[m] = self._decay * self._w[m] + 1.0
        if labelled:
            self._sl[m] = self._decay * self._sl[m] + float(error)
            self._wl[m] = self._decay * self._wl[m] + 1.0
        self.count[m] += 1
        self.labelled[m] += int(labelled)
        self.errors[m] += z

    def threshold(self, starts: tuple[float, ...] = (1.0,)) -> int | None:
        """The index of the lowest grid threshold a fixed sequence reaches: from the
        highest at or below each start level whose evidence could pass (`spotless`), down, stopping at
        the first whose wealth is short of len(starts)/delta. None: none reached."""
        need = math.log(len(starts) / self.delta)
        testable = (self.count >= self.start) & (self.spotless >= need - 1e-9)
        best = None
        for level in starts:
            start = np.flatnonzero(testable & (self.grid <= level + 1e-12))
            if not len(start):
                continue
            i = int(start[0])
            fails = np.flatnonzero(self.log_wealth[i:] < need)
            last = (i + int(fails[0]) - 1) if len(fails) else len(self.grid) - 1
            if last >= i and (best is None or last > best):
                best = last
        return best

    def rule(self, audit_share: float, starts: tuple[float, ...] = STARTS) -> AutonomyRule:
        """The rule this ledger proves now, stated with the confidence sequence's upper end
        at the threshold (valid whenever read, at delta / len(starts))."""
        key = (audit_share, starts)
        if key not in self._rules:
            self._rules[key] = self._prove(audit_share, starts)
        return self._rules[key]

    def _prove(self, audit_share: float, starts: tuple[float, ...]) -> AutonomyRule:
        base = dict(target=self.target, delta=self.delta, audit_share=audit_share)
        i = self.threshold(starts)
        need = math.log(len(starts) / self.delta)
        if i is None:
            top = int(np.argmax(self.count))  # the lowest grid threshold: all the evidence
            # Above the target only: below the sequences' start a bet may have won at the
            # target already, and "nothing proven, bound within target" would read as a
            # contradiction; a looser level is as valid a bound.
            won = np.flatnonzero((self.level_wealth[top] >= need) & (self.levels > self.target))
            bound = float(self.levels[won[0]]) if len(won) else 1.0
            return AutonomyRule(bound=bound, evidence=int(self.labelled[top]), errors=int(self.wrong[top]), **base)
        won = np.flatnonzero(self.level_wealth[i] >= need)
        bound = float(self.levels[won[0]]) if len(won) else self.target
        return AutonomyRule(
            threshold=float(self.lowest[i]),
            bound=bound,
            evidence=int(self.labelled[i]),
            errors=int(self.wrong[i]),
            **base,
        )


class DriftTest:
    """The drift test of one context, over its audited answers as they come."""

    def __init__(self, target: float, delta: float) -> None:
        self.target, self.delta = target, delta
        self.log_wealth = 0.0
        self.audits = 0
        self._s, self._w = PRIOR_N * target, PRIOR_N
        self._decay = 0.5 ** (1.0 / DRIFT_RECENT)

    def add(self, error: bool) -> bool:
        """One audited answer; True once the error is shown above target."""
        t, p = self.target, self._s / self._w
        stake = min(max(KELLY * (p - t) / (t * (1 - t)), 0.0), STAKE_CAP / t)
        self.log_wealth += math.log1p(stake * (float(error) - t))
        self._s = self._decay * self._s + float(error)
        self._w = self._decay * self._w + 1.0
        self.audits += 1
        return self.alarm

    @property
    def alarm(self) -> bool:
        return self.log_wealth >= math.log(1.0 / self.delta)
