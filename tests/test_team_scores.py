"""The team replay's figures (vicar/eval/team_scores.py) against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from vicar.eval.metrics import Prediction
from vicar.eval.team_scores import hindsight, online_rule, plugin_threshold, proven_threshold, suggestions, team_scores


def P(actual="approve", predicted="approve", score=0.9, **kw) -> Prediction:
    kw.setdefault("alone_action", predicted)
    kw.setdefault("autonomous", False)
    return Prediction(seq=0, actual=actual, predicted=predicted, confidence=score, alone_score=score, **kw)


def test_accuracy_on_the_test_decisions_and_the_first_gates():
    person = [
        P(split="train"),  # gate 1: not an early gate
        P(actual="reject", split="train"),  # gate 2: wrong
        P(split="train", ask_first=True),  # gate 3: right (asked-first answers count here)
        P(split="train"),  # gate 4: right
        P(split="train"),  # gate 5: right
        P(split="test"),  # right
        P(actual="reject", predicted="approve", alone_action="reject", split="test"),  # proposal wrong, alone right
        P(split="test", ask_first=True),  # not one of the study's test decisions
    ]
    t = team_scores({"p1": person})
    assert t.study and t.test == 2 and t.test_gates == 3 and t.early == 4
    assert t.test_accuracy == pytest.approx(0.5) and t.test_alone_accuracy == pytest.approx(1.0)
    assert t.early_accuracy == pytest.approx(3 / 4)
    assert t.ask_share == pytest.approx(2 / 8)


def test_a_lone_answer_where_the_person_wanted_to_be_asked_is_an_error():
    preds = [P(autonomous=True), P(autonomous=True, ask_first=True), P(autonomous=True, actual="reject"), P()]
    t = team_scores({"p": preds})
    assert t.alone == 3 and t.alone_share == pytest.approx(3 / 4) and t.alone_error == pytest.approx(2 / 3)


def test_hindsight_takes_the_largest_share_within_the_target():
    # Scores 0.99..0.80: the top 19 right, then one asked-first; 20 more below, all wrong.
    preds = [P(score=1 - i / 100) for i in range(1, 20)] + [P(score=0.80, ask_first=True)]
    preds += [P(score=0.5, actual="reject") for _ in range(20)]
    share, threshold = hindsight(preds, 0.05)
    assert share == pytest.approx(20 / 40) and threshold == pytest.approx(0.80)
    assert hindsight(preds, 0.0) == (pytest.approx(19 / 40), pytest.approx(0.81))


def test_the_online_thresholds_read_only_the_earlier_people():
    scores = np.array([0.9] * 100 + [0.6] * 100)
    right = np.array([True] * 100 + [True] * 80 + [False] * 20)
    # 100 right of 100 at 0.9: Clopper-Pearson's 95% upper bound 2.95% <= 5%; with the 0.6s, 10% wrong.
    assert proven_threshold(scores, right) == pytest.approx(0.9)
    assert proven_threshold(scores[:50], right[:50]) is None  # 50 right of 50: the bound is 5.8%
    assert plugin_threshold(scores, right, 0.10) == pytest.approx(0.6)
    first = [P(score=0.9) for _ in range(100)]
    second = [P(score=0.95), P(score=0.5)]
    alone = online_rule([first, second])
    assert alone[0] == [False] * 100  # nobody before the first person
    assert alone[1] == [True, False]


def test_a_run_of_identical_answers_becomes_a_rule_until_contradicted():
    kind = dict(kind="bash:git status")
    preds = [P(**kind) for _ in range(5)] + [P(**kind), P(actual="reject", **kind), P(**kind)]
    rules, answered = suggestions(preds)
    assert rules == 1 and answered == [None] * 5 + [True, False, True]
    # An asked-first answer in the run, or a contrary one, spoils the kind.
    spoiled = [P(ask_first=True, **kind)] + [P(**kind) for _ in range(8)]
    assert suggestions(spoiled) == (0, [None] * 9)
    mixed = [P(**kind), P(actual="reject", **kind)] + [P(**kind) for _ in range(8)]
    assert suggestions(mixed)[0] == 0
