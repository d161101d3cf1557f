"""The confidence shown to the human is the score recalibrated on the proxy's record."""

from __future__ import annotations

import numpy as np

from vicar.models import AutonomyRule, CalibrationInputs
from vicar.proxy.calibration import calibrate
from vicar.proxy.recalibration import LEAST, REFIT_EVERY, Recalibrator, fit_platt, shown
from vicar.settings import CalibrationParams


def _ece(conf: np.ndarray, ok: np.ndarray, bins: int = 10) -> float:
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    return float(sum((idx == b).mean() * abs(ok[idx == b].mean() - conf[idx == b].mean()) for b in set(idx)))


def _overconfident(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores whose truth is sigmoid(0.7 * logit(score) - 0.25): right less often than said."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.5, 0.995, n)
    truth = 1 / (1 + np.exp(-(0.7 * np.log(s / (1 - s)) - 0.25)))
    return s, rng.random(n) < truth


def test_the_fit_finds_the_map_and_the_shown_confidence_is_calibrated():
    s, ok = _overconfident(4000, 0)
    a, b = fit_platt(s, ok)
    assert abs(a - 0.7) < 0.1 and abs(b + 0.25) < 0.15
    # judged on fresh gates, not the ones fitted on
    s2, ok2 = _overconfident(4000, 1)
    recal = np.array([shown(x, (a, b)) for x in s2])
    assert _ece(s2, ok2) > 0.05
    assert _ece(recal, ok2) < 0.02


def test_no_map_before_enough_pairs_or_with_one_outcome_only():
    r = Recalibrator(2000)
    r.extend((i + 1, 0.9, True) for i in range(LEAST * 3))
    assert r.map is None  # every answer right: nothing to scale against
    r = Recalibrator(2000)
    s, ok = _overconfident(LEAST - 1, 2)
    r.extend((i + 1, float(x), bool(y)) for i, (x, y) in enumerate(zip(s, ok)))
    assert r.map is None and shown(0.9, r.map) == 0.9
    assert shown(0.0, (0.5, 1.0)) == 0.0  # no confidence stays none


def test_the_map_depends_on_the_pairs_not_on_when_they_were_read():
    """A worker that read the pairs in one go and one that read them a few at a time (a
    long-running process) show the same number: fits happen at multiples of REFIT_EVERY."""
    s, ok = _overconfident(LEAST + 3 * REFIT_EVERY + 7, 3)
    pairs = [(i + 1, float(x), bool(y)) for i, (x, y) in enumerate(zip(s, ok))]
    whole, bit_by_bit = Recalibrator(150), Recalibrator(150)
    whole.extend(pairs)
    for i in range(0, len(pairs), 13):
        bit_by_bit.extend(pairs[i : i + 13])
    assert whole.map is not None and whole.map == bit_by_bit.map
    assert whole.last_seq == bit_by_bit.last_seq == len(pairs)


def test_the_rule_judges_the_score_and_the_human_sees_the_recalibrated_confidence():
    rule = AutonomyRule(target=0.05, delta=0.05, audit_share=0.0, threshold=0.9, bound=0.04, evidence=500)
    params = CalibrationParams()
    fitted = (0.7, -0.25)
    alone = calibrate(0.93, CalibrationInputs(rule=rule, confidence_map=fitted), params)
    assert alone.autonomous and alone.score == 0.93
    assert alone.confidence == shown(0.93, fitted) < 0.93
    # the shown number is below the threshold, the score is not: the rule still acts
    assert alone.confidence < rule.threshold
    below = calibrate(0.85, CalibrationInputs(rule=rule, confidence_map=fitted), params)
    assert not below.autonomous and below.guard == "unproven" and below.score == 0.85
    assert f"{round(100 * below.confidence)}% sure" in below.note  # the note speaks the shown scale
    assert calibrate(0.93, CalibrationInputs(rule=rule), params).confidence == 0.93  # no map yet
