"""The approval gate end to end on a real Temporal dev server."""

from __future__ import annotations

from vicar.gates import answer_gate, gate_details, start_gate
from vicar.models import AnsweredBy, GateStatus, HumanAnswer

from .conftest import wait_for


async def escalate_and_answer(h, req, action="approve", text="Looks good."):
    handle = await start_gate(h.client, req, h.task_queue)

    async def escalated():
        d = await gate_details(h.client, req.gate_id)
        return d if d and d.status is GateStatus.escalated else None

    details = await wait_for(escalated)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action=action, text=text, responder="alice"))
    return details, await handle.result()


async def test_gate_escalates_and_completes_on_answer(harness):
    h = harness
    p = h.principal()
    req = h.request(p, artifact="Add an index on users.email. Rollback: drop the index.")
    details, result = await escalate_and_answer(h, req, "correct", "What about the lock time?")
    assert details.proxy_confidence == 0.0  # nothing in memory: no basis for a guess
    assert result.escalated and result.answered_by is AnsweredBy.human
    assert result.action.value == "correct" and result.text == "What about the lock time?"
    assert result.n == 1
    mem = h.registry.get(p)
    stats = mem.stats()
    assert stats.chunks == 1 and stats.human_answered == 1


async def test_gate_decides_alone_when_memory_is_confident(harness):
    h = harness
    p = h.principal()
    for i in range(4):
        req = h.request(p, task_type="docs", artifact=f"Fix typo number {i} in the installation guide.")
        _, result = await escalate_and_answer(h, req, "approve", "Fine, ship it.")
        assert result.escalated
    req = h.request(p, task_type="docs", artifact="Fix a typo in the installation guide.")
    result = await (await start_gate(h.client, req, h.task_queue)).result()
    assert not result.escalated
    assert result.answered_by is AnsweredBy.proxy
    assert result.action.value == "approve" and result.confidence >= 0.8
    assert result.text == "Fine, ship it."
    assert result.n == 5
