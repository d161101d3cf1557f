"""The replay's figures for the bound, on hand-made histories: the per-stretch hindsight
ceiling beside the fixed one, stretch errors, and coverage at each check."""

from __future__ import annotations

import pytest

from vicar.eval import metrics as m


def test_a_threshold_that_moves_beats_a_fixed_one_in_hindsight():
    # Stretch 1: right at >= 0.9, wrong below; stretch 2: right at >= 0.5, wrong below.
    first = [(0.95, True)] * 5 + [(0.6, False)] * 5
    second = [(0.6, True)] * 5 + [(0.3, False)] * 5
    scores, right = zip(*(first + second))
    per, fixed = m.hindsight_ceiling(list(scores), list(right), stretch=10)
    assert per == pytest.approx(0.5)  # 5 of 10 in each stretch
    assert fixed == pytest.approx(0.25)  # one threshold: 0.95 only (at 0.6, 5 wrong of 15)
    assert m.hindsight_ceiling([None] * 4, [False] * 4, stretch=2) == (0.0, 0.0)


def test_stretch_errors_and_coverage_at_each_check():
    alone = [True] * 40 + [False] * 10 + [True] * 10
    right = [True] * 36 + [False] * 4 + [True] * 20
    assert m.stretch_errors(alone, right, stretch=50, least=30) == [(0, 40, pytest.approx(0.1))]  # 2nd: 10 alone
    # A bound stated at every gate: covered where the next 50 gates' error alone is within it.
    cov, checks = m.statement_coverage([0.05] * 60, alone, right, horizon=50, least=30)
    assert checks == 21  # gates 0..20 see >= 30 answers alone in their next 50 (50 - t for t > 10)
    assert cov == pytest.approx(0.0)  # 4 wrong of >= 30: above 5% for each
    cov, _ = m.statement_coverage([0.2] * 60, alone, right, horizon=50, least=30)
    assert cov == 1.0
    assert m.statement_coverage([None] * 60, alone, right) == (None, 0)


def test_coverage_within_sampling_noise():
    """3 wrong of 40 is above a 5% bound as a share, but answers erring at 5% reach 3
    wrong in 40 about one time in three: within noise. 8 wrong of 40 they reach about one
    time in 1,400: a miss either way."""
    alone, stated = [True] * 40 + [False] * 460, [0.05] + [None] * 499
    three = [True] * 37 + [False] * 3 + [True] * 460
    assert m.statement_coverage(stated, alone, three) == (0.0, 1)
    assert m.statement_coverage(stated, alone, three, noise=0.05) == (1.0, 1)
    eight = [True] * 32 + [False] * 8 + [True] * 460
    assert m.statement_coverage(stated, alone, eight, noise=0.05) == (0.0, 1)
