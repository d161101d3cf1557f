"""The autonomy rule's evidence in the store (written once per gate, only by human
answers) and its per-principal, per-state parameters. The bets themselves:
tests/test_sequential.py."""

from __future__ import annotations

import pytest

from vicar.errors import InvalidInput
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.autonomy.drift import labelled_pairs
from vicar.proxy.autonomy.ledger import autonomy_pairs
from vicar.proxy.autonomy.rule import AUTONOMY_FILE, autonomy_params
from vicar.proxy.outcomes import record_outcome
from vicar.settings import AutonomyParams, CalibrationParams, MemoryParams, Settings

from .conftest import rule_for


def gate(p: str, gid: str, state: str = "PLAN_ASSERT", kind: str = "gate") -> GateRequest:
    return GateRequest(
        principal=p,
        gate_id=gid,
        state=state,
        task_type="docs",
        kind=kind,
        question="Approve or revise the plan.",
        artifact_text="Fix a typo.",
    )


def outcome(
    p: str,
    i: int,
    action: str,
    predicted: str | None,
    score: float,
    by=AnsweredBy.human,
    guard: str = "unproven",
    kind: str = "gate",
) -> OutcomeRecord:
    post = PassResult(
        prose="ok" if predicted else "", confidence=score, action=Action(predicted) if predicted else None
    )
    return OutcomeRecord(
        request=gate(p, f"g{i}", kind=kind),
        n=i,
        workflow_id=f"vicar-gate/g{i}",
        action=Action(action),
        response_text="ok",
        answered_by=by,
        prior=post,
        posterior=post,
        calibration=Calibration(confidence=score, guard=guard),
    )


def test_pairs_come_from_human_answers_once_per_gate(tmp_path, embedder):
    p = "alice"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        record_outcome(memory, outcome(p, 1, "approve", "approve", 0.9), artifacts=False)
        record_outcome(memory, outcome(p, 1, "approve", "approve", 0.9), artifacts=False)  # a retried activity
        record_outcome(memory, outcome(p, 2, "reject", "approve", 0.8), artifacts=False)
        record_outcome(memory, outcome(p, 3, "approve", None, 0.0), artifacts=False)  # no prediction: wrong
        record_outcome(memory, outcome(p, 4, "approve", "approve", 0.99, by=AnsweredBy.proxy), artifacts=False)
        record_outcome(memory, outcome(p, 5, "approve", None, 0.0, guard="proxy_error"), artifacts=False)
        record_outcome(memory, outcome(p, 6, "answer", "answer", 0.7, kind="question"), artifacts=False)
        store = memory.store
        assert [(s, ok) for _, s, ok in autonomy_pairs(store, "gate")] == [(0.9, True), (0.8, False), (0.0, False)]
        assert [(s, ok) for _, s, ok in autonomy_pairs(store, "question")] == [(0.7, True)]
        assert [s for _, s, _ in autonomy_pairs(store, "gate", limit=2)] == [0.8, 0.0]  # the newest, in order
        rows = store._db.execute(
            "SELECT outcome_seq, kind, state, task_type, n FROM autonomy_pairs ORDER BY seq"
        ).fetchall()
        assert [r[4] for r in rows] == [1, 2, 3, 6]
        assert all(store.outcome_seq(f"vicar-gate/g{r[4]}") == r[0] for r in rows)  # from the outcome
        assert rows[0][1:4] == ("gate", "PLAN_ASSERT", "docs")
    finally:
        memory.close()


def test_parameters_per_principal_and_state(tmp_path, embedder):
    base = AutonomyParams()
    d = tmp_path / "bob"
    d.mkdir()
    assert autonomy_params(base, d, "PLAN_ASSERT") == base  # no file: the defaults
    (d / AUTONOMY_FILE).write_text(
        '{"target_error": 0.25, "audit_share": 0.5, "states": {"WORK_ASSERT": {"target_error": 0.1, "delta": 0.1}}}'
    )
    plan = autonomy_params(base, d, "PLAN_ASSERT")
    assert (plan.target_error, plan.audit_share, plan.delta) == (0.25, 0.5, 0.05)
    work = autonomy_params(base, d, "WORK_ASSERT")
    assert (work.target_error, work.audit_share, work.delta) == (0.1, 0.5, 0.1)
    for bad, why in [
        ('{"target_error": 2}', "target_error"),
        ('{"target": 0.1}', "target"),
        ('{"states": {"X": {"audit_share": -1}}}', "states.X.audit_share"),
        ("{", "file"),
    ]:
        (d / AUTONOMY_FILE).write_text(bad)
        with pytest.raises(InvalidInput, match=f"not a valid autonomy file: {why}"):
            autonomy_params(base, d, "PLAN_ASSERT")
    # Through the consult path: 21 right answers prove 0.25 for this principal (the betting
    # rule, valid whenever read: 20 do not), not the default 5%.
    (d / AUTONOMY_FILE).write_text('{"target_error": 0.25}')
    memory = PrincipalMemory("bob", tmp_path, embedder, MemoryParams())
    try:
        for i in range(1, 21):
            record_outcome(memory, outcome("bob", i, "approve", "approve", 0.99), artifacts=False)
        assert rule_for(memory, gate("bob", "next"), CalibrationParams()).threshold is None
        record_outcome(memory, outcome("bob", 21, "approve", "approve", 0.99), artifacts=False)
        rule = rule_for(memory, gate("bob", "next"), CalibrationParams())
        assert (rule.threshold, rule.evidence, rule.target) == (0.99, 21, 0.25)
        (d / AUTONOMY_FILE).unlink()
        rule = rule_for(memory, gate("bob", "next"), CalibrationParams())
        assert (rule.threshold, rule.target) == (None, 0.05)
    finally:
        memory.close()


def test_environment_defaults(monkeypatch):
    monkeypatch.setenv("VICAR_AUTONOMY_TARGET_ERROR", "0.1")
    monkeypatch.setenv("VICAR_AUTONOMY_WEIGHTING", " Labelled ")
    p = Settings.from_env().calibration.autonomy
    assert (p.target_error, p.delta, p.audit_share, p.weighting) == (0.1, 0.05, 0.05, "labelled")
    monkeypatch.setenv("VICAR_AUTONOMY_AUDIT_SHARE", "1.5")
    with pytest.raises(InvalidInput, match="VICAR_AUTONOMY_AUDIT_SHARE"):
        Settings.from_env()


def test_an_audited_pair_keeps_its_audit_probability(tmp_path, embedder):
    p = "carol"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        audited = outcome(p, 1, "approve", "approve", 0.97, guard="audit")
        audited.calibration.audit_share = 0.05
        record_outcome(memory, audited, artifacts=False)
        record_outcome(memory, outcome(p, 2, "reject", "approve", 0.4), artifacts=False)  # escalated: no weight
        pairs = labelled_pairs(memory.store, "gate")
        assert [(x.score, x.correct, x.audit_p) for x in pairs] == [(0.97, True, 0.05), (0.4, False, None)]
        assert (pairs[0].state, pairs[0].task_type) == ("PLAN_ASSERT", "docs")
        assert [x.seq for x in labelled_pairs(memory.store, "gate", after_seq=pairs[0].seq)] == [pairs[1].seq]
    finally:
        memory.close()
