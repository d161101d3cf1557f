"""The autonomy rule's sequential tests, simulated: a statement "error <= target" made
at any moment of a run whose error is in fact at the target happens in at most ~delta
of runs for the betting test and the spent re-checks, and in far more for the fixed-n
bound re-checked after every answer (the issue's reason 2). The drift test sees a jump
from 2% to 15% within a bounded number of audits and rarely alarms without one."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from vicar.proxy.autonomy.bets import (
    BettingLedger,
    DriftTest,
    _plug_in,
    betting_log_wealth,
    betting_passes,
    betting_upper_bound,
    drift_alarm,
    fewest_to_prove,
)

TARGET, DELTA = 0.05, 0.05
RUNS, LENGTH = 400, 3000
# Monte Carlo slack: 3 standard deviations of a share delta over RUNS runs.
SLACK = 3 * math.sqrt(DELTA * (1 - DELTA) / RUNS)


def runs(p: float, seed: int, runs: int = RUNS, length: int = LENGTH) -> np.ndarray:
    return (np.random.default_rng(seed).random((runs, length)) < p).astype(float)


def naive_ever_states(x: np.ndarray) -> bool:
    """Today's check after every answer: the fixed-n Clopper-Pearson bound over all the
    answers so far, at delta, every time."""
    k = np.cumsum(x)
    n = np.arange(1, len(x) + 1)
    ub = special.betaincinv(k + 1, np.maximum(n - k, 1e-12), 1 - DELTA)
    return bool(np.any((ub <= TARGET) & (k < n)))


def upper_bound(errors: int, n: int, delta: float) -> float:
    """The one-sided Clopper-Pearson bound (the retired rule's, bench/retired_rules.py)."""
    return 1.0 if errors >= n else float(special.betaincinv(errors + 1, n - errors, 1.0 - delta))


def spent_delta(delta: float, check: int) -> float:
    """Re-check j spends delta / ((j + 1)(j + 2)): the union bound the rule once used."""
    return delta / ((check + 1) * (check + 2))


def spent_ever_states(x: np.ndarray, first: int = 59, ratio: float = 1.2) -> bool:
    k = np.cumsum(x)
    j = 0
    while (count := math.ceil(first * ratio**j)) <= len(x):
        if upper_bound(int(k[count - 1]), count, spent_delta(DELTA, j)) <= TARGET:
            return True
        j += 1
    return False


def test_only_the_time_uniform_statements_hold_at_every_moment():
    x = runs(TARGET, seed=1)  # the error is exactly at target: "<= target" is never proven
    naive = np.mean([naive_ever_states(r) for r in x])
    betting = np.mean([np.any(betting_log_wealth(r, TARGET) >= math.log(1 / DELTA)) for r in x])
    spent = np.mean([spent_ever_states(r) for r in x])
    assert naive > 3 * DELTA, naive  # optional stopping: measured ~0.3
    assert betting <= DELTA + SLACK, betting
    assert spent <= DELTA + SLACK, spent
    # Above the target, still within delta (the harder case for the naive check is at it).
    worse = runs(0.06, seed=2)
    assert np.mean([np.any(betting_log_wealth(r, TARGET) >= math.log(1 / DELTA)) for r in worse]) <= DELTA + SLACK


def test_the_bet_proves_a_low_error_and_weights_audits():
    good = runs(0.01, seed=3, runs=50)
    assert np.mean([betting_passes(r, TARGET, DELTA) for r in good]) > 0.9  # 3,000 answers at 1%
    clean = fewest_to_prove(TARGET, DELTA, rate=0.0)
    assert not betting_passes(np.zeros(clean - 1), TARGET, DELTA) and betting_passes(np.zeros(clean), TARGET, DELTA)
    assert fewest_to_prove(TARGET, DELTA, rate=0.3) > clean
    # Audits drawn with probability q weigh 1/q: at the target error, still within delta.
    q, rng = 0.2, np.random.default_rng(4)
    ever = []
    for _ in range(200):
        err = rng.random(LENGTH) < TARGET
        audited = rng.random(LENGTH) < q
        lw = betting_log_wealth(err & audited, TARGET, np.full(LENGTH, 1 / q), labelled=audited)
        ever.append(np.any(lw >= math.log(1 / DELTA)))
    assert np.mean(ever) <= DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / 200)
    # The confidence sequence's upper end now: below target on a clean record, 1 on none.
    assert betting_upper_bound(np.zeros(400), DELTA) < TARGET
    assert betting_upper_bound(np.zeros(3), DELTA) == 1.0


def test_the_ledger_is_the_bet_per_threshold_and_stops_at_the_first_failure():
    rng = np.random.default_rng(5)
    scores = rng.random(800)
    wrong = rng.random(800) < np.where(scores > 0.5, 0.0, 0.4)
    ledger = BettingLedger(TARGET, DELTA)
    for s, w in zip(scores, wrong):
        ledger.add(float(s), bool(w))
    for i in (10, 100, 150):
        t = ledger.grid[i]
        assert math.isclose(ledger.log_wealth[i], betting_log_wealth(wrong[scores >= t], TARGET)[-1], rel_tol=1e-9)
    i = ledger.threshold()
    assert i is not None and 0.45 <= ledger.grid[i] <= 0.6  # the errors start below 0.5
    assert BettingLedger(TARGET, DELTA).threshold() is None


def test_the_stake_follows_the_labelled_answers_not_one_heavy_audit():
    """Mixed as the product feeds it: human answers (weight 1), audits (1/q) and answers
    alone not audited (1/q, unlabelled). The ledger is the bet per threshold; one wrong
    audit (z = 20) no longer stops the betting for a half-life."""
    q, rng = 0.05, np.random.default_rng(7)
    n = 3000
    scores = rng.random(n)
    alone = scores > 0.6
    audited = alone & (rng.random(n) < q)
    labelled = ~alone | audited
    wrong = (rng.random(n) < np.where(scores > 0.6, 0.01, 0.3)) & labelled
    weights = np.where(alone, 1 / q, 1.0)
    ledger = BettingLedger(TARGET, DELTA)
    for s_, e, w, lab in zip(scores, wrong, weights, labelled):
        ledger.add(float(s_), bool(e), float(w), bool(lab))
    for i in (20, 60, 79):
        m = scores >= ledger.grid[i]
        expected = betting_log_wealth(wrong[m], TARGET, weights[m], labelled[m])[-1]
        assert math.isclose(ledger.log_wealth[i], expected, rel_tol=1e-9), (i, ledger.log_wealth[i], expected)
    # A long clean record (the person's own answers), then answers alone audited at q,
    # one of them wrong: the weighted estimate jumps above target (z = 20 at once, every
    # stake 0 until it decays); the labelled one moves by one answer in ~150 and bets on.
    n = 2000
    errs = np.zeros(n)
    errs[1500] = 1.0
    w = np.where(np.arange(n) < 1000, 1.0, 1 / q)
    lab = (np.arange(n) < 1000) | (np.arange(n) % 20 == 0)
    assert _plug_in(errs * w, TARGET)[1501] > TARGET
    assert _plug_in(errs, TARGET, observed=lab)[1501] < TARGET / 2
    lw = betting_log_wealth(errs, TARGET, w, lab)
    assert lw[1600] > lw[1501]


def test_labelled_stakes_stay_valid_at_the_target():
    """At exactly the target error, audited at q, the bet with stakes from the labelled
    answers states "error <= target" at most delta of the time (Ville)."""
    q, rng, ever = 0.1, np.random.default_rng(8), []
    for _ in range(300):
        err = rng.random(LENGTH) < TARGET
        audited = rng.random(LENGTH) < q
        human = rng.random(LENGTH) < 0.5  # half answered by the person anyway: weight 1
        lab = audited | human
        w = np.where(human, 1.0, 1 / q)
        lw = betting_log_wealth(err & lab, TARGET, w, lab)
        ever.append(np.any(lw >= math.log(1 / DELTA)))
    assert np.mean(ever) <= DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / 300)


def test_the_drift_test_sees_a_jump_soon_and_rarely_cries_wolf():
    rng = np.random.default_rng(6)
    delays, false_alarms = [], 0
    for _ in range(300):
        before = rng.random(300) < 0.02
        after = rng.random(1000) < 0.15
        hit = drift_alarm(np.concatenate([before, after]), TARGET, DELTA)
        delays.append(10_000 if hit is None else hit - 300)
        false_alarms += drift_alarm(rng.random(2000) < TARGET, TARGET, DELTA) is not None
    assert np.percentile(delays, 95) <= 250, np.percentile(delays, [50, 95])  # audits after the jump
    assert min(delays) >= 0  # no alarm in the 2% stretch
    assert false_alarms / 300 <= DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / 300)
    # The incremental test agrees with the function.
    seq = np.concatenate([np.zeros(100), np.ones(40)])
    test = DriftTest(TARGET, DELTA)
    first = next(i for i, e in enumerate(seq) if test.add(bool(e)))
    assert first == drift_alarm(seq, TARGET, DELTA)
