"""What the score knows (vicar/eval/separation.py), against independent computations:
scikit-learn's AUROC and average precision, and hand-made streams for the one-tap share,
the pre-fill baseline and the error per context."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from vicar.eval.separation import auprc, auroc, context_errors, one_tap, prefill, separation


def test_auroc_and_auprc_agree_with_scikit_learn():
    rng = np.random.default_rng(3)
    for n in (5, 50, 500):
        right = rng.random(n) < 0.7
        right[:2] = [True, False]
        score = np.where(right, rng.random(n) * 0.6 + 0.3, rng.random(n) * 0.6)
        assert auroc(score, right) == pytest.approx(roc_auc_score(right, score), abs=1e-12)
        assert auprc(score, right) == pytest.approx(average_precision_score(right, score), abs=1e-12)
        tied = np.round(score, 1)  # ties count half, as scikit-learn counts them
        assert auroc(tied, right) == pytest.approx(roc_auc_score(right, tied), abs=1e-12)
    assert auroc([0.9, 0.8], [True, True]) is None and auprc([0.1], [False]) is None


def test_the_pre_fill_is_the_most_frequent_answer_so_far_never_the_gates_own():
    assert prefill(["approve", "correct", "correct", "approve", "approve"]) == [
        None,
        "approve",
        "approve",  # a tie: the answer first given
        "correct",
        "approve",  # 2-2 again: ties go to the answer first given
    ]


def test_one_tap_counts_answers_alone_and_right_suggestions_that_need_no_words():
    alone = [True, False, False, False]
    suggested = ["approve", "approve", "correct", "reject"]
    actual = ["correct", "approve", "correct", "approve"]
    # alone (even wrong: nobody tapped), right approve, right correct (words: not one tap), wrong
    assert one_tap(alone, suggested, actual) == 0.5


def test_contexts_with_enough_answers_alone_worst_first():
    tasks = ["docs"] * 12 + ["db"] * 10 + ["api"] * 3
    alone = [True] * 25
    right = [True] * 11 + [False] + [True] * 7 + [False] * 3 + [False] * 3
    rows = context_errors(tasks, alone, right)
    assert [(r.task_type, r.alone, round(r.error, 3)) for r in rows] == [("db", 10, 0.3), ("docs", 12, 0.083)]


def test_separation_puts_the_baseline_beside_the_proxy():
    actual = ["approve"] * 6 + ["correct"] * 4
    s = separation(
        scores=[0.9] * 6 + [0.2] * 4,
        right=[True] * 6 + [False] * 4,
        alone=[False] * 10,
        suggested=["approve"] * 10,
        actual=actual,
        task_types=["docs"] * 10,
        prefilled=prefill(actual),
    )
    assert s.auroc == 1.0 and s.base_rate == 0.6 and s.one_tap == 0.6
    assert s.prefill_one_tap == 0.5  # the first has no pre-fill; the corrects need words
