"""Each calibration guard fires through a real gate (Temporal dev server, real memory):
memory seeded with human answers the way record_outcome writes them (each a pair of
the autonomy rule's evidence), then a gate that the offline predictor alone would
answer confidently."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from vicar.client.gates import answer_gate, start_gate
from vicar.models import Action, AnsweredBy, GateRequest, HumanAnswer, OutcomeRecord, PassResult
from vicar.proxy.autonomy import audit_draw
from vicar.proxy.outcomes import record_outcome
from vicar.settings import AutonomyParams, CalibrationParams, Settings

from .conftest import wait_escalated

ARTIFACT = "Fix a typo in the installation guide."


AUDIT = 0.15


@pytest.fixture
def settings(tmp_path) -> Settings:
    # A target four agreeing answers can prove (0.8), and a real audit share: gate ids
    # are picked by their draw.
    return Settings(
        data_dir=tmp_path / "vicar",
        calibration=CalibrationParams(autonomy=AutonomyParams(target_error=0.8, audit_share=AUDIT)),
    )


def gate_id(principal: str, audited: bool) -> str:
    for i in itertools.count():
        gid = f"guard-{principal}-{i}"
        if (audit_draw(principal, f"vicar-gate/{gid}") < AUDIT) == audited:
            return gid
    raise AssertionError("itertools.count() does not end")


def seed(
    h,
    principal: str,
    answers: list[tuple[str, str]],
    at: datetime,
    predicted: str = "approve",
    question: str = "Approve or revise the proposed plan.",
    agent: str | None = None,
) -> None:
    memory = h.registry.get(principal)
    for i, (action, text) in enumerate(answers, start=1):
        req = GateRequest(
            principal=principal,
            gate_id=f"seed-{i}",
            state="PLAN_ASSERT",
            task_type="docs",
            question=question,
            artifact_text=ARTIFACT,
            upstream_agent=agent,
        )
        guess = PassResult(prose="", confidence=0.5, action=Action(predicted))
        record_outcome(
            memory,
            OutcomeRecord(
                request=req,
                n=i,
                workflow_id=f"seed/{principal}/{i}",
                action=Action(action),
                response_text=text,
                answered_by=AnsweredBy.human,
                prior=guess,
                posterior=guess,
                at=at + timedelta(minutes=i),
            ),
        )
        memory.raise_counter(i)


async def run_gate(h, principal: str, audited: bool = False):
    req = h.request(principal, task_type="docs", artifact=ARTIFACT, gate_id=gate_id(principal, audited))
    handle = await start_gate(h.client, req, h.task_queue)
    return req, handle


def now() -> datetime:
    return datetime.now(UTC)


async def test_fresh_consistent_memory_decides_alone(harness):
    p = harness.principal()
    seed(harness, p, [("approve", "Fine.")] * 4, now() - timedelta(hours=1))
    _, handle = await run_gate(harness, p)
    result = await handle.result()
    assert not result.escalated and result.calibration_guard == "passthrough"
    # The seeds' four right predictions at score 0.5 prove the threshold 0.5.
    assert (result.autonomy_threshold, result.autonomy_evidence) == (0.5, 4)
    # The betting rule's bound (its confidence sequence's upper end; Clopper-Pearson's at one
    # moment was 1 - 0.05 ** (1 / 4) = 0.527): within the loose target, looser than a fixed-n one.
    assert 1 - 0.05 ** (1 / 4) < result.autonomy_bound <= 0.8
    assert result.confidence >= 0.5


async def test_staleness_fires_on_workflow_time(harness):
    p = harness.principal()
    seed(harness, p, [("approve", "Fine.")] * 4, now() - timedelta(days=8))
    req, handle = await run_gate(harness, p)
    details = await wait_escalated(harness.client, req.gate_id)
    assert details.calibration_guard == "staleness" and details.proxy_confidence == 0.5
    assert details.proxy_action is Action.approve  # the prediction itself was confident
    await handle.terminate()


async def test_unproven_fires_on_a_poor_track_record(harness):
    p = harness.principal()
    seed(harness, p, [("approve", "Fine.")] * 10, now() - timedelta(hours=1), predicted="reject")
    req, handle = await run_gate(harness, p)
    details = await wait_escalated(harness.client, req.gate_id)
    assert details.calibration_guard == "unproven"
    assert details.calibration_note == "no threshold proven: bound 1.000 over 10 answers > target 0.8"
    assert details.proxy_action is Action.approve  # the memory itself agrees: only the record is poor
    await handle.terminate()


async def test_tension_guard_fires_on_disagreeing_recent_answers(harness):
    p = harness.principal()
    seed(
        harness,
        p,
        [("approve", "Fine."), ("reject", "No, not like this."), ("approve", "Fine.")],
        now() - timedelta(hours=1),
    )
    req, handle = await run_gate(harness, p)
    details = await wait_escalated(harness.client, req.gate_id)
    assert details.calibration_guard == "tension" and "disagree" in details.calibration_note
    await handle.terminate()


async def test_audit_fires_for_the_gates_it_draws(harness):
    p = harness.principal()
    seed(harness, p, [("approve", "Fine.")] * 4, now() - timedelta(hours=1))
    req, handle = await run_gate(harness, p, audited=True)
    details = await wait_escalated(harness.client, req.gate_id)
    assert details.calibration_guard == "audit" and "acts alone from 50%" in details.calibration_note
    assert details.proxy_confidence > 0.5  # an audit does not doubt the score
    await handle.terminate()


async def test_a_new_upstream_agent_is_on_probation_through_a_real_gate(harness):
    """The same confident memory answers alone for an agent the human has answered three
    times, and never for a new one until the human has answered it three times too."""
    p = harness.principal()
    seed(harness, p, [("approve", "Fine.")] * 4, now() - timedelta(hours=1), agent="known-bot")

    async def gate(agent: str, i: int):
        req = harness.request(p, task_type="docs", artifact=ARTIFACT, gate_id=f"{gate_id(p, False)}-{agent}-{i}")
        req = req.model_copy(update={"upstream_agent": agent})
        while audit_draw(p, f"vicar-gate/{req.gate_id}") < AUDIT:  # never an audit sample
            req = req.model_copy(update={"gate_id": req.gate_id + "x"})
        return req, await start_gate(harness.client, req, harness.task_queue)

    _, known = await gate("known-bot", 0)
    result = await known.result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy
    for i in range(3):
        req, handle = await gate("new-bot", i)
        details = await wait_escalated(harness.client, req.gate_id)
        assert details.calibration_guard == "probation", (i, details.calibration_guard)
        assert f"answered {i} of its artifacts < 3" in details.calibration_note
        await answer_gate(harness.client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
        assert (await handle.result()).answered_by is AnsweredBy.human
    _, trusted = await gate("new-bot", 3)
    result = await trusted.result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy and result.action is Action.approve
