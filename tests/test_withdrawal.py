"""Drift in the store: audited answers that go wrong in one context withdraw autonomy
there at once (the rule in force states no threshold, with the reason, for that
context only), reviews count like audits, and the same rule re-earns it on the
context's own answers since."""

from __future__ import annotations

from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, AutonomyRule, Calibration, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.autonomy import rule_in_force
from vicar.proxy.health import rule_lines
from vicar.proxy.outcomes import record_outcome
from vicar.settings import AutonomyParams, MemoryParams

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


async def test_the_webhook_is_told_once_per_withdrawal(temporal_env, embedder, tmp_path):
    """On a real server and worker: the first gate of a withdrawn context tells the
    webhook `autonomy_withdrawn` with the context and the reason; later gates there, and
    gates of other contexts, do not."""
    import uuid

    from vicar.memory.registry import MemoryRegistry
    from vicar.settings import CalibrationParams, Settings
    from vicar.worker import build_worker

    from .conftest import VicarHarness, let_test_responders_in
    from .test_deadline import Receiver
    from .test_gate import run_answering

    receiver = Receiver(fail_first=0)
    settings = Settings(data_dir=tmp_path / "vicar", calibration=CalibrationParams(), webhook_url=receiver.url)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    let_test_responders_in(settings.principals_dir, P)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    try:
        async with worker:
            h = VicarHarness(temporal_env.client, task_queue, registry, settings)
            memory = registry.get(P)
            for i in range(1, 400):
                record_outcome(memory, record(i, "docs" if i % 2 else "db", True, audited=False), artifacts=False)
            for i in range(400, 412):  # audits in `db` come back wrong
                record_outcome(memory, record(i, "db", False, audited=True), artifacts=False)
            db = rule_in_force(memory.store, memory.dir, settings.calibration.autonomy, "PLAN_ASSERT", task_type="db")
            assert db.withdrawn
            gates = [h.request(P, task_type=t, state="PLAN_ASSERT") for t in ("db", "db", "docs")]
            for req in gates:
                result = await run_answering(h, req)
                assert result.escalated or req.task_type == "docs"
    finally:
        registry.close()
        receiver.server.shutdown()
    told = [(body, key) for body, key in receiver.posts if body["event"] == "autonomy_withdrawn"]
    assert len(told) == 1, receiver.posts
    body, key = told[0]
    first = gates[0].gate_id
    assert body["gate"]["gate_id"] == first and key == body["event_id"] and key.endswith(f"{first}/autonomy_withdrawn")
    assert body["withdrawn"]["state"] == "PLAN_ASSERT" and body["withdrawn"]["task_type"] == "db"
    reason = body["withdrawn"]["reason"]
    assert reason.startswith("autonomy withdrawn: the audits of this context show") and " wrong of " in reason


def test_a_withdrawal_is_announced_by_one_gate_and_again_on_its_retry(tmp_path, embedder):
    from vicar.proxy.autonomy.rule import announcement

    memory = PrincipalMemory(P, tmp_path, embedder, MemoryParams())
    withdrawn = AutonomyRule(target=0.05, delta=0.05, audit_share=0.05, withdrawn="why", withdrawn_seq=7)
    later = withdrawn.model_copy(update={"withdrawn_seq": 9})

    def announced(rule: AutonomyRule, gate: str) -> bool:
        return announcement(memory.store, "gate", "PLAN_ASSERT", "db", rule, gate) == "why"

    try:
        assert announced(withdrawn, "vicar-gate/a")
        assert announced(withdrawn, "vicar-gate/a")  # a retried consult of the same gate
        assert not announced(withdrawn, "vicar-gate/b")
        assert announced(later, "vicar-gate/b")  # a later withdrawal
        assert not announced(withdrawn.model_copy(update={"withdrawn": ""}), "vicar-gate/c")  # none in force
    finally:
        memory.close()
