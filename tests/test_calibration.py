"""The calibration guards and the autonomy rule's two (unproven, audit), each made to
fire; conflict triage; the audit draw."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vicar.models import AnsweredBy, AutonomyRule, CalibrationInputs, ChunkSummary
from vicar.proxy.autonomy import audit_draw
from vicar.proxy.calibration import calibrate
from vicar.proxy.conflicts import ConflictKind, classify_conflict, genuine_tension
from vicar.settings import CalibrationParams

P = CalibrationParams()
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
PROVEN = AutonomyRule(threshold=0.8, bound=0.048, evidence=612, errors=12, target=0.05, delta=0.05, audit_share=0.05)
QUIET = CalibrationInputs(memory_depth=5, now=NOW, last_human_at=NOW - timedelta(days=1), rule=PROVEN, audit_draw=0.9)


def chunk(cid, outcome, sim=0.9, n=10, agent=None, by=AnsweredBy.human):
    return ChunkSummary(
        chunk_id=cid,
        state="PLAN_ASSERT",
        task_type="t",
        outcome=outcome,
        answered_by=by,
        created_n=n,
        upstream_agent=agent,
        activation=0.0,
        similarity=sim,
        score=sim,
    )


def test_passthrough_when_no_guard_fires():
    c = calibrate(0.93, QUIET, P)
    assert (c.confidence, c.guard, c.fired, c.autonomous) == (0.93, "passthrough", [], True)
    assert (c.threshold, c.bound, c.evidence, c.errors, c.target) == (0.8, 0.048, 612, 12, 0.05)
    assert "acts alone from 80% (bound 0.048 over 612 answers)" in c.note


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


def test_unproven_fires_without_a_proven_threshold_or_below_it():
    none = QUIET.model_copy(
        update={"rule": PROVEN.model_copy(update={"threshold": None, "bound": 0.12, "evidence": 37})}
    )
    c = calibrate(0.97, none, P)
    assert (c.guard, c.autonomous, c.confidence) == ("unproven", False, 0.97)  # the score is not doubted
    assert c.note == "no threshold proven: bound 0.120 over 37 answers > target 0.05"
    below = calibrate(0.71, QUIET, P)
    assert (below.guard, below.autonomous) == ("unproven", False)
    assert below.note == "71% sure < 80% needed to act alone (bound 0.048 over 612 answers, target 0.05)"
    assert calibrate(0.8, QUIET, P).autonomous  # ties are included
    zero = QUIET.model_copy(update={"rule": PROVEN.model_copy(update={"threshold": 0.0})})
    assert calibrate(0.0, zero, P).guard == "unproven" and calibrate(0.01, zero, P).autonomous
    # No rule at all (nothing computed): nothing proven.
    assert calibrate(0.99, QUIET.model_copy(update={"rule": None}), P).guard == "unproven"


def test_audit_fires_for_draws_under_the_share_of_gates_the_rule_lets_through():
    c = calibrate(0.95, QUIET.model_copy(update={"audit_draw": 0.049}), P)
    assert (c.guard, c.autonomous, c.confidence) == ("audit", False, 0.95)
    assert "share 0.05" in c.note and "acts alone from 80%" in c.note and "612 answers" in c.note
    assert calibrate(0.95, QUIET.model_copy(update={"audit_draw": 0.05}), P).autonomous
    # A gate the rule does not let through is not audited: it goes to the human as unproven.
    assert calibrate(0.5, QUIET.model_copy(update={"audit_draw": 0.01}), P).fired == ["unproven"]


def test_probation_withholds_a_new_agents_gate_until_the_human_has_answered_enough():
    new = QUIET.model_copy(update={"agent": "bot-7", "agent_human_answers": 2})
    c = calibrate(0.95, new, P)
    assert (c.guard, c.autonomous, c.confidence) == ("probation", False, 0.95)  # withheld, not doubted
    assert c.note == "upstream agent 'bot-7' on probation: the human has answered 2 of its artifacts < 3"
    # Enough answers, or no agent named, or probation off: the rule decides.
    assert calibrate(0.95, new.model_copy(update={"agent_human_answers": 3}), P).autonomous
    assert calibrate(0.95, QUIET.model_copy(update={"agent_human_answers": 0}), P).autonomous
    assert calibrate(0.95, new, P.model_copy(update={"probation_answers": 0})).autonomous
    # Listed beside unproven, and it comes before the audit draw: a probation gate is no audit sample.
    assert calibrate(0.5, new, P).fired == ["unproven", "probation"]
    assert calibrate(0.95, new.model_copy(update={"audit_draw": 0.01}), P).fired == ["probation"]


def test_audit_draw_is_reproducible_and_near_the_share():
    assert audit_draw("alice", "vicar-gate/g1") == audit_draw("alice", "vicar-gate/g1")
    assert audit_draw("alice", "vicar-gate/g1") != audit_draw("bob", "vicar-gate/g1")
    draws = [audit_draw("alice", f"vicar-gate/g{i}") for i in range(4000)]
    share = sum(d < 0.15 for d in draws) / len(draws)
    assert 0.13 < share < 0.17 and all(0 <= d < 1 for d in draws)


def test_guards_apply_in_the_designs_order_and_all_are_listed():
    everything = CalibrationInputs(
        memory_depth=0,
        tension="x",
        now=NOW,
        last_human_at=NOW - timedelta(days=30),
        rule=PROVEN.model_copy(update={"threshold": None}),
        audit_draw=0.01,
    )
    c = calibrate(0.99, everything, P.model_copy(update={"memory_depth_threshold": 1}))
    assert c.guard == "cold_start" and not c.autonomous
    assert c.fired == ["cold_start", "tension", "staleness", "unproven"]
    assert c.confidence == 0.5  # the memory guards cap
    # A guard caps, it never raises a low confidence.
    assert calibrate(0.2, everything, P).confidence == 0.2
    audited = calibrate(0.99, everything.model_copy(update={"rule": PROVEN}), P)
    assert audited.fired == ["tension", "staleness", "audit"]


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
