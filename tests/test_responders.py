"""Answers carry who gave them; a principal's allow-list says who may; an answer
signalled before the gate escalates is kept and applied."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.worker import Worker
from typer.testing import CliRunner

from vicar import contracts as c
from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.errors import VicarError
from vicar.models import AnsweredBy, GateStatus, HumanAnswer, OutcomeRecord
from vicar.models.brain import BrainConfig, BrainInput, TurnRequest
from vicar.responders import load_allowed, responders_path

from .conftest import DeafGate, wait_escalated, wait_for
from .test_bad_input import cli_env, error_line  # noqa: F401 (a fixture)

runner = CliRunner()


async def cli(*args: str, env: dict | None = None):
    return await asyncio.to_thread(runner.invoke, app, list(args), env=env)


def stored_responders(h, principal: str) -> tuple[list[str | None], list[str | None]]:
    """Who answered, as the outcome log and the memory chunks have it."""
    store = h.registry.get(principal).store
    outcomes = [OutcomeRecord.model_validate_json(r).responder for _, r in store.outcomes(answered_by="human")]
    return outcomes, [ch.responder for ch in store.chunks("answered_by = 'human'")]


async def test_cli_answer_records_the_os_user_or_vicar_responder(cli_env, harness, monkeypatch):
    h = harness
    me = getpass.getuser()
    p = h.principal(responders=(me, "carol", "dan"))
    monkeypatch.delenv("VICAR_RESPONDER", raising=False)
    results = []
    for env in (None, {"VICAR_RESPONDER": "carol"}):
        req = h.request(p, artifact=f"Plan {uuid.uuid4().hex[:6]}: add a column.")
        handle = await start_gate(h.client, req, h.task_queue)
        await wait_escalated(h.client, req.gate_id)
        result = await cli("answer", req.gate_id, "approve", "ok", env=env)
        assert result.exit_code == 0, result.output
        results.append(await handle.result())
    assert [r.responder for r in results] == [me, "carol"]
    outcomes, chunks = stored_responders(h, p)
    assert sorted(outcomes) == sorted(chunks) == sorted([me, "carol"])

    # `vicar health` says who answered, per context.
    result = await cli("health", p)
    assert result.exit_code == 0, result.output
    assert "answered by" in result.output and "carol 1" in result.output and f"{me} 1" in result.output

    # Without any responder the client and the gate both refuse.
    req = h.request(p, artifact="Plan: drop a column.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    with pytest.raises(VicarError, match="needs a responder"):
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve"))
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update("respond", HumanAnswer(action="approve", responder="  "), result_type=str)
    assert "needs a responder" in str(info.value.cause)
    await handle.signal("human_response", HumanAnswer(action="approve"))  # logged and ignored
    await asyncio.sleep(0.5)
    assert (await gate_details(h.client, req.gate_id)).status is GateStatus.escalated
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="no", responder="dan"))
    assert (await handle.result()).responder == "dan"


async def test_allow_list_refuses_others_on_update_and_signal(cli_env, harness):
    h = harness
    p = h.principal(responders=None)
    result = await cli("principal", "allowed", p)
    assert result.exit_code == 0 and "anyone" in result.output
    assert f"{p} has no allow-list: only {p} itself answers for it" in " ".join(result.output.split())
    result = await cli("principal", "allow", p, "alice", "bob")
    assert result.exit_code == 0, result.output
    assert "alice, bob" in result.output
    assert load_allowed(h.settings.principals_dir, p) == ["alice", "bob"]

    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    result = await cli("answer", req.gate_id, "approve", "ok", "--responder", "mallory")
    assert result.exit_code == 5
    assert "'mallory' may not answer for" in error_line(result) and "allowed: alice, bob" in error_line(result)
    with pytest.raises(VicarError, match="'mallory' may not answer"):
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="no", responder="mallory"))
    await handle.signal("human_response", HumanAnswer(action="reject", text="no", responder="mallory"))
    await asyncio.sleep(0.5)
    assert (await gate_details(h.client, req.gate_id)).status is GateStatus.escalated  # still waiting

    # A dialog question from bob: `vicar escalations` shows who asked.
    result = await cli("answer", req.gate_id, "dialog", "Why now?", "--responder", "bob")
    assert result.exit_code == 0, result.output

    async def replied():
        d = await gate_details(h.client, req.gate_id)
        return d if len(d.dialog) == 2 and d.status is GateStatus.escalated else None

    await wait_for(replied)
    result = await cli("escalations", "--principal", p)
    assert result.exit_code == 0, result.output
    cells = " ".join(result.output.replace("│", " ").split())  # the table wraps long cells
    assert "reviewer (bob): Why now? agent:" in cells

    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
    gate = await handle.result()
    assert gate.responder == "alice" and gate.answered_by is AnsweredBy.human
    assert [t.responder for t in gate.dialog if t.speaker == "reviewer"] == ["bob"]
    outcomes, chunks = stored_responders(h, p)
    assert outcomes == chunks == ["alice"]

    result = await cli("principal", "disallow", p, "alice", "bob")
    assert result.exit_code == 0 and "anyone" in result.output
    assert load_allowed(h.settings.principals_dir, p) == []


async def test_unreadable_allow_list_refuses_everyone(cli_env, harness):
    h = harness
    p = h.principal(responders=None)
    path = responders_path(h.settings.principals_dir, p)
    path.parent.mkdir(parents=True)
    path.write_text('{"responders": "alice"')  # a hand edit gone wrong
    assert "not a valid allow-list" in error_line(await cli("principal", "allowed", p))
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    with pytest.raises(VicarError, match="until their allow-list is fixed"):
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", responder="alice"))
    await handle.terminate()


@contextlib.asynccontextmanager
async def turn_held(h, principal: str):
    """A deaf gate holds the principal's turn until released, so new gates stay queued."""
    queue = f"deaf-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=queue, workflows=[DeafGate]):
        deaf = await h.client.start_workflow(DeafGate.run, id=f"deaf-{uuid.uuid4().hex[:8]}", task_queue=queue)
        brain = await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=principal, config=BrainConfig()),
            id=c.brain_workflow_id(principal),
            task_queue=h.task_queue,
            start_signal="request_turn",
            start_signal_args=[TurnRequest(gate_id="deaf", workflow_id=deaf.id)],
        )
        await wait_for(lambda: deaf.query(DeafGate.has_turn))
        try:
            yield lambda: brain.signal("release_turn", "deaf")
        finally:
            await deaf.terminate()


async def test_a_signal_before_escalation_is_kept_and_applied(harness, caplog):
    h = harness
    p = h.principal()
    caplog.set_level(logging.WARNING)
    async with turn_held(h, p) as release:
        unsure = h.request(p)  # a fresh principal: the proxy escalates
        alone = h.request(p, escalation_mode="never")  # the proxy answers whatever it knows
        handles = [await start_gate(h.client, r, h.task_queue) for r in (unsure, alone)]
        for r in (unsure, alone):
            await wait_for(lambda: gate_details(h.client, r.gate_id))
        await handles[0].signal("human_response", HumanAnswer(action="sure", responder="alice"))  # invalid
        await handles[0].signal(
            "human_response", HumanAnswer(action="correct", text="Split it in two.", responder="alice")
        )
        await handles[1].signal("human_response", HumanAnswer(action="reject", text="No.", responder="alice"))
        for r in (unsure, alone):
            assert (await gate_details(h.client, r.gate_id)).status is GateStatus.queued
        await release()
        # Before the fix the first gate dropped its signal and waited for ever.
        first, second = [await asyncio.wait_for(hd.result(), 60) for hd in handles]
    assert first.escalated and first.answered_by is AnsweredBy.human and first.responder == "alice"
    assert (first.action.value, first.text) == ("correct", "Split it in two.")
    assert not second.escalated and second.answered_by is AnsweredBy.proxy and second.responder is None
    warnings = [r.getMessage() for r in caplog.records if "ignored human_response" in r.getMessage()]
    assert any("unknown action 'sure'" in w for w in warnings), warnings
    assert any("the proxy answered the gate" in w for w in warnings), warnings
