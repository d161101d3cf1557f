"""A consistent habit earns confidence (issue 36 item 3), in-process on the consult path
the gate runs (the learned predictor, the memory guards, the autonomy rule), with the
demo's scripted person: docs and patch bumps always approved, a migration approved only
with a rollback step, an API change rejected only when it breaks clients.

Seen failing before the fix: the first fit (30 answers, no leaf of 30 possible) scored
every gate at the person's overall rate (0.83) under a proven threshold of 0.87, and the
tension guard capped every plan at 0.50 because two plans of one task type had been
answered differently."""

from __future__ import annotations

import pytest

from vicar.demo import scenario, scripted_human
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, ChunkSummary, OutcomeRecord
from vicar.proxy.conflicts import SAME_CASE, genuine_tension
from vicar.proxy.consult import consult
from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.outcomes import record_outcome
from vicar.settings import AutonomyParams, CalibrationParams, MemoryParams, Settings

# The demo's own rule (vicar/demo: DEMO_AUTONOMY), no audits so the run is one path.
DEMO_RULE = AutonomyParams(target_error=0.4, delta=0.2, audit_share=0.0)


def run(memory: PrincipalMemory, settings: Settings, gates: int) -> list[tuple[str, bool, bool, float]]:
    """(task type, answered alone, right, score) per gate, the person answering what escalates."""
    predictor = LearnedPredictor(settings.predictor)
    out = []
    for n, req in enumerate((r for wave in scenario("ada", gates, "habit") for r in wave), 1):
        c = consult(memory, predictor, req, n, settings)
        human = scripted_human(req)
        alone = not c.decision.escalate
        action = c.decision.action if alone and c.decision.action else Action(human.action)
        record = OutcomeRecord(
            request=req,
            n=n,
            workflow_id=f"vicar-gate/{req.gate_id}",
            action=action,
            response_text=c.decision.text if alone else human.text,
            answered_by=AnsweredBy.proxy if alone else AnsweredBy.human,
            prior=c.prior,
            posterior=c.posterior,
            calibration=c.calibration,
        )
        record_outcome(memory, record, artifacts=False, params=settings.calibration)
        predictor.observe(record)
        out.append((req.task_type, alone, action.value == human.action, c.posterior.confidence))
    return out


def test_a_consistent_habit_earns_autonomy_and_artifact_dependent_answers_are_no_tension(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path, calibration=CalibrationParams(autonomy=DEMO_RULE))
    memory = PrincipalMemory("ada", tmp_path / "principals", embedder, MemoryParams())
    try:
        gates = run(memory, settings, 60)
    finally:
        memory.close()
    alone = [g for g in gates if g[1]]
    assert len(alone) >= 15, f"{len(alone)} of 60 alone"
    wrong = sum(not right for _, _, right, _ in alone)
    assert wrong / len(alone) <= DEMO_RULE.target_error, f"{wrong} of {len(alone)} alone were wrong"
    # The habits that never vary are answered alone in the second half, plans included.
    late = gates[30:]
    for task in ("docs", "dependency-bump"):
        assert any(t == task and a for t, a, _, _ in late), task
    assert any(t in ("db-migration", "api-change") and a for t, a, _, _ in late)


def chunk(cid: str, outcome: str) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=cid,
        state="PLAN_ASSERT",
        task_type="db-migration",
        outcome=outcome,
        answered_by=AnsweredBy.human,
        activation=0.0,
        similarity=0.9,
        score=0.9,
        created_n=1 if cid == "a" else 2,
    )


@pytest.mark.parametrize(
    ("first", "second", "tension"),
    [
        (
            "Plan: add an index on users.email. Rollback: drop the index.",
            "Plan: drop table legacy. No rollback.",
            False,
        ),
        (
            "Plan: add an index on users.email. Rollback: drop the index.",
            "Plan: add an index on users.email. Rollback: drop the index!",
            True,
        ),
    ],
)
def test_two_answers_are_a_tension_only_when_their_artifacts_are_one_case(tmp_path, embedder, first, second, tension):
    from vicar.memory.chunk import MemoryChunk

    memory = PrincipalMemory("ada", tmp_path, embedder, MemoryParams())
    try:
        for cid, outcome, artifact in (("a", "approve", first), ("b", "correct", second)):
            memory.record(
                MemoryChunk(
                    id=cid,
                    principal="ada",
                    state="PLAN_ASSERT",
                    task_type="db-migration",
                    outcome=outcome,
                    answered_by="human",
                    question="Approve the plan?",
                    artifact_excerpt=artifact,
                    created_n=1,
                    traces=[1],
                )
            )
        alike = memory.similarity("a", "b", "artifact")
        assert alike is not None and (alike >= SAME_CASE) == tension
        said = genuine_tension([chunk("a", "approve"), chunk("b", "correct")], CalibrationParams(), memory)
        assert bool(said) == tension
        # Without the memory to compare artifacts, any such pair is a tension, as before.
        assert genuine_tension([chunk("a", "approve"), chunk("b", "correct")], CalibrationParams())
    finally:
        memory.close()
