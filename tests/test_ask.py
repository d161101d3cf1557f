"""AskQuestion: an agent's question mid-turn goes through the same consult path; the
proxy answers as the human would, or the human answers when it is escalated."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.errors import VicarError
from vicar.models import AnsweredBy, GateRequest, GateStatus, HumanAnswer

from .conftest import wait_escalated, wait_for

QUESTION = "Should the migration keep the old column until the next release?"


def ask(h, p, question=QUESTION, **kw) -> GateRequest:
    return h.request(p, kind="question", question=question, **kw)


async def test_question_escalates_then_the_proxy_answers_from_memory(harness):
    h = harness
    p = h.principal()
    answer = "Yes, keep it for one release, then drop it."
    # Five answers: the betting rule, valid whenever read, proves the loose test target on
    # four agreeing answers after the first (no memory yet, no prediction, no score); the
    # fixed-n bound it replaced took three answers in all.
    for i in range(5):
        req = ask(h, p, question=f"{QUESTION} (table {i})")
        handle = await start_gate(h.client, req, h.task_queue)
        await wait_escalated(h.client, req.gate_id)
        with pytest.raises(VicarError, match="valid actions: answer"):
            await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder=p))
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="answer", text=answer, responder=p))
        result = await handle.result()
        assert result.answered_by is AnsweredBy.human and result.text == answer
    req = ask(h, p, question=f"{QUESTION} (table 9)")
    result = await (await start_gate(h.client, req, h.task_queue)).result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy
    assert result.action.value == "answer" and result.text == answer
    # Questions are their own kind of memory: a gate in the same context does not see them.
    gate = h.request(p, artifact="Drop the old column.")
    handle = await start_gate(h.client, gate, h.task_queue)
    details = await wait_escalated(h.client, gate.gate_id)
    assert details.proxy_confidence == 0.0
    await handle.terminate()
    stats = h.registry.get(p).stats()
    assert stats.chunks == 6 and stats.human_answered == 5


async def test_vicar_ask_prints_the_humans_answer(harness, monkeypatch, temporal_env, settings):
    h = harness
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("VICAR_TASK_QUEUE", h.task_queue)
    p = h.principal()
    run = asyncio.create_task(
        asyncio.to_thread(
            CliRunner().invoke,
            app,
            ["ask", p, QUESTION, "--state", "WORK_ASSERT", "--task-type", "db-migration", "--id", f"ask-{p}"],
        )
    )

    async def escalated():
        try:
            d = await gate_details(h.client, f"ask-{p}")
        except VicarError:  # the CLI has not started it yet
            return None
        return d if d and d.status is GateStatus.escalated else None

    await wait_for(escalated)
    await answer_gate(h.client, f"ask-{p}", HumanAnswer(action="answer", text="Keep it.", responder=p))
    result = await run
    assert result.exit_code == 0, result.output
    assert "answered by the human: Keep it." in result.output
