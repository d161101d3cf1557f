"""Drift in the store: audited answers that go wrong in one context withdraw autonomy
there at once (the rule in force states no threshold, with the reason, for that
context only), reviews count like audits, and the same rule re-earns it on the
context's own answers since."""

from __future__ import annotations

from vicar.config import AutonomyParams, MemoryParams
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.consult import rule_in_force
from vicar.proxy.health import rule_lines
from vicar.proxy.outcomes import record_outcome

P = "dora"


def record(i: int, task_type: str, right: bool, audited: bool, score: float = 0.97) -> OutcomeRecord:
    post = PassResult(prose="ok", confidence=score, action=Action.approve)
    return OutcomeRecord(
        request=GateRequest(
            principal=P, gate_id=f"g{i}", state="PLAN_ASSERT", task_type=task_type, question="Approve the plan?"
        ),
        n=i,
        workflow_id=f"vicar-gate/g{i}",
        action=Action.approve if right else Action.reject,
        response_text="ok",
        answered_by=AnsweredBy.human,
        prior=post,
        posterior=post,
        calibration=Calibration(
            confidence=score, guard="audit" if audited else "unproven", audit_share=0.05 if audited else None
        ),
    )


def test_audits_withdraw_one_context_and_the_rule_re_earns_it(tmp_path, embedder):
    memory = PrincipalMemory(P, tmp_path, embedder, MemoryParams())
    base = AutonomyParams()
    try:
        i = 0
        for _ in range(400):  # enough right answers to prove a threshold, and keep it through a few errors
            i += 1
            record_outcome(memory, record(i, "docs" if i % 2 else "db", True, audited=False), artifacts=False)

        def rule(task_type: str):
            return rule_in_force(memory.store, memory.dir, base, "PLAN_ASSERT", task_type=task_type)

        assert rule("db").threshold is not None and not rule("db").withdrawn
        # Audits in `db` start coming back wrong: a handful shows it above 5%.
        alarms = None
        for k in range(1, 30):
            i += 1
            record_outcome(memory, record(i, "db", False, audited=True), artifacts=False)
            if rule("db").withdrawn:
                alarms = k
                break
        assert alarms is not None and alarms <= 10, alarms
        db, docs = rule("db"), rule("docs")
        assert db.threshold is None and "autonomy withdrawn" in db.withdrawn
        assert docs.threshold is not None and not docs.withdrawn  # the other context keeps its autonomy
        assert rule_in_force(memory.store, memory.dir, base, "PLAN_ASSERT").threshold is not None  # pooled
        lines = rule_lines({("PLAN_ASSERT", "db"): db, ("PLAN_ASSERT", "docs"): docs})
        assert any("task type db" in line and "withdrawn" in line for line in lines), lines
        # Re-earned by the same rule over the context's answers since the withdrawal.
        since = 0
        while rule("db").withdrawn and since < 400:
            i += 1
            since += 1
            record_outcome(memory, record(i, "db", True, audited=False), artifacts=False)
        assert not rule("db").withdrawn and rule("db").threshold is not None
        assert 100 <= since < 400, since  # not at once: the bet has to be won again
    finally:
        memory.close()
