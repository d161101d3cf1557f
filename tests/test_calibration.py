"""The six calibration guards, each made to fire; conflict triage; the exploration draw."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from vicar.config import CalibrationParams
from vicar.models import AnsweredBy, CalibrationInputs, ChunkSummary
from vicar.proxy.calibration import calibrate, exploration_draw
from vicar.proxy.conflicts import ConflictKind, classify_conflict, genuine_tension

P = CalibrationParams()
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
QUIET = CalibrationInputs(memory_depth=5, now=NOW, last_human_at=NOW - timedelta(days=1), exploration_draw=0.9)


def chunk(cid, outcome, sim=0.9, n=10, agent=None, by=AnsweredBy.human):
    return ChunkSummary(chunk_id=cid, state="PLAN_ASSERT", task_type="t", outcome=outcome, answered_by=by,
                        created_n=n, upstream_agent=agent, activation=0.0, similarity=sim, score=sim)


def test_passthrough_when_no_guard_fires():
    c = calibrate(0.93, QUIET, P)
    assert (c.confidence, c.guard, c.fired) == (0.93, "passthrough", [])


def test_cold_start_fires_below_the_depth_threshold():
    params = P.model_copy(update={"memory_depth_threshold": 3})
    c = calibrate(0.95, QUIET.model_copy(update={"memory_depth": 2}), params)
    assert (c.confidence, c.guard) == (0.5, "cold_start")
    assert calibrate(0.95, QUIET.model_copy(update={"memory_depth": 3}), params).guard == "passthrough"
    # The design's default threshold 0 never fires.
    assert calibrate(0.95, QUIET.model_copy(update={"memory_depth": 0}), P).guard == "passthrough"


def test_tension_fires_on_a_genuine_tension():
    tension = genuine_tension([chunk("a", "approve", n=10), chunk("b", "reject", n=14)], P)
    assert tension
    c = calibrate(0.95, QUIET.model_copy(update={"tension": tension}), P)
    assert (c.confidence, c.guard) == (0.5, "tension") and "disagree" in c.note


def test_staleness_fires_after_seven_days_of_workflow_time():
    stale = QUIET.model_copy(update={"last_human_at": NOW - timedelta(days=7, hours=1)})
    c = calibrate(0.95, stale, P)
    assert (c.confidence, c.guard) == (0.5, "staleness") and "7.0 days" in c.note
    fresh = QUIET.model_copy(update={"last_human_at": NOW - timedelta(days=6, hours=23)})
    assert calibrate(0.95, fresh, P).guard == "passthrough"
    # No clock (a replay) or no human answer yet: not judged.
    assert calibrate(0.95, stale.model_copy(update={"now": None}), P).guard == "passthrough"
    assert calibrate(0.95, QUIET.model_copy(update={"last_human_at": None}), P).guard == "passthrough"


def test_exploration_fires_for_draws_under_the_rate():
    c = calibrate(0.95, QUIET.model_copy(update={"exploration_draw": 0.149}), P)
    assert (c.confidence, c.guard) == (0.5, "exploration")
    assert calibrate(0.95, QUIET.model_copy(update={"exploration_draw": 0.15}), P).guard == "passthrough"


def test_exploration_draw_is_reproducible_and_near_the_rate():
    assert exploration_draw("alice", "vicar-gate/g1") == exploration_draw("alice", "vicar-gate/g1")
    assert exploration_draw("alice", "vicar-gate/g1") != exploration_draw("bob", "vicar-gate/g1")
    draws = [exploration_draw("alice", f"vicar-gate/g{i}") for i in range(4000)]
    share = sum(d < 0.15 for d in draws) / len(draws)
    assert 0.13 < share < 0.17 and all(0 <= d < 1 for d in draws)


def test_accuracy_guard_needs_ten_answers_and_fires_below_085():
    low = QUIET.model_copy(update={"posterior_correct": 8, "posterior_total": 10})
    c = calibrate(0.95, low, P)
    assert (c.confidence, c.guard) == (0.5, "accuracy") and "0.80 over 10" in c.note
    assert calibrate(0.95, low.model_copy(update={"posterior_correct": 9}), P).guard == "passthrough"
    assert calibrate(0.95, low.model_copy(update={"posterior_correct": 1, "posterior_total": 9}), P).guard == "passthrough"


def test_guards_apply_in_the_designs_order_and_all_are_listed():
    everything = CalibrationInputs(
        memory_depth=0, tension="x", now=NOW, last_human_at=NOW - timedelta(days=30),
        exploration_draw=0.01, posterior_correct=0, posterior_total=20)
    c = calibrate(0.99, everything, P.model_copy(update={"memory_depth_threshold": 1}))
    assert c.guard == "cold_start"
    assert c.fired == ["cold_start", "tension", "staleness", "exploration", "accuracy"]
    # A guard caps, it never raises a low confidence.
    assert calibrate(0.2, everything, P).confidence == 0.2


def test_conflict_triage():
    a = chunk("a", "approve", n=10)
    assert classify_conflict(a, chunk("b", "approve"), P) is None
    assert classify_conflict(a, chunk("b", "reject", sim=0.5), P) is ConflictKind.retrieval_noise
    assert classify_conflict(a, chunk("b", "reject", n=200), P) is ConflictKind.preference_drift
    assert classify_conflict(a, chunk("b", "reject", agent="bot-2"), P) is ConflictKind.context_sensitivity
    assert classify_conflict(a, chunk("b", "correct", n=12), P) is ConflictKind.genuine_tension
    # A proxy answer is never one side of a human's tension.
    assert classify_conflict(a, chunk("b", "reject", by=AnsweredBy.proxy), P) is None
    assert genuine_tension([a, chunk("b", "approve"), chunk("c", "reject", sim=0.4)], P) == ""


@pytest.mark.parametrize("confidence", [0.0, 0.5, 0.81, 1.0])
def test_calibrated_confidence_never_exceeds_the_input(confidence):
    assert calibrate(confidence, QUIET, P).confidence == confidence
