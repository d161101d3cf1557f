"""Every text Vicar takes in has a limit, refused in one line before anything starts or
is stored: by the models (the workflow's update validator included) and, with the
configured limits, by the CLI."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError

from vicar.cli import app
from vicar.client.gates import answer_gate, start_gate
from vicar.models import (
    GateRequest,
    GateStatus,
    HumanAnswer,
)
from vicar.models.limits import DEFAULT_LIMITS, MAX_ARTIFACT_PATHS, NAME_CHARS, PATH_CHARS, TASK_TYPE_CHARS

from .conftest import wait_escalated
from .test_bad_input import cli_env, error_line, gate_exists, runner  # noqa: F401 (fixture)

BASE = dict(principal="alice", state="PLAN_ASSERT", task_type="docs", question="Approve?")
OVER = {
    "question": "q" * (DEFAULT_LIMITS.question + 1),
    "artifact_text": "a" * (DEFAULT_LIMITS.artifact_text + 1),
    "actor_message": "m" * (DEFAULT_LIMITS.actor_message + 1),
    "task_type": "t" * (TASK_TYPE_CHARS + 1),
    "upstream_agent": "u" * (NAME_CHARS + 1),
    "session_id": "s" * (NAME_CHARS + 1),
    "artifact_paths": ["/p"] * (MAX_ARTIFACT_PATHS + 1),
}


@pytest.mark.parametrize("field", [*OVER, "artifact_paths.0"])
def test_every_gate_request_text_over_its_limit_is_refused(field):
    over = {"artifact_paths": ["/" + "p" * PATH_CHARS]} if field == "artifact_paths.0" else {field: OVER[field]}
    with pytest.raises(ValidationError) as info:
        GateRequest(gate_id="g1", **{**BASE, **over})
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [field]
    # At the limit it is accepted.
    at = {k: (v[:-1] if isinstance(v, str) else v[:-1]) for k, v in over.items()}
    if field == "artifact_paths.0":
        at = {"artifact_paths": ["/" + "p" * (PATH_CHARS - 1)]}
    GateRequest(gate_id="g1", **{**BASE, **at})


@pytest.mark.parametrize("field", ["action", "text", "responder"])
def test_every_human_answer_text_over_its_limit_is_refused(field):
    limit = DEFAULT_LIMITS.answer_text if field == "text" else NAME_CHARS
    with pytest.raises(ValidationError) as info:
        HumanAnswer(**{"action": "approve", field: "x" * (limit + 1)})
    assert [e["loc"] for e in info.value.errors()] == [(field,)]


async def test_gate_start_refuses_each_over_limit_field_in_one_line(cli_env, temporal_env, tmp_path, monkeypatch):
    gid = f"g-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "gate.json"
    for field, value in OVER.items():
        spec.write_text(json.dumps({**BASE, "gate_id": gid, field: value}))
        result = await asyncio.to_thread(runner.invoke, app, ["gate", "start", str(spec)])
        assert result.exit_code == 2
        assert error_line(result).startswith(f"error: invalid GateRequest: {field}:")
    # A configured limit lower than the model's.
    monkeypatch.setenv("VICAR_MAX_ARTIFACT_CHARS", "1000")
    spec.write_text(json.dumps({**BASE, "gate_id": gid, "artifact_text": "a" * 1001}))
    result = await asyncio.to_thread(runner.invoke, app, ["gate", "start", str(spec)])
    assert result.exit_code == 2
    assert error_line(result) == (
        "error: artifact_text has 1001 characters, more than the limit of 1000 (VICAR_MAX_ARTIFACT_CHARS)"
    )
    monkeypatch.setenv("VICAR_MAX_QUESTION_CHARS", "10")
    result = await asyncio.to_thread(
        runner.invoke,
        app,
        ["ask", "alice", "What is the rollback plan?", "--state", "PLAN_ASSERT", "--task-type", "docs", "--id", gid],
    )
    assert "question has 26 characters, more than the limit of 10" in error_line(result)
    assert not await gate_exists(temporal_env.client, gid)


def test_answer_over_the_limit_is_one_line_before_connecting(monkeypatch, settings):
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    result = runner.invoke(app, ["answer", "no-such-gate", "correct", "x" * 1_000_000])
    assert result.exit_code == 2
    assert error_line(result) == "error: invalid HumanAnswer: text: String should have at most 20000 characters"
    monkeypatch.setenv("VICAR_MAX_ANSWER_CHARS", "100")
    result = runner.invoke(app, ["answer", "no-such-gate", "correct", "x" * 101])
    assert error_line(result) == (
        "error: answer_text has 101 characters, more than the limit of 100 (VICAR_MAX_ANSWER_CHARS)"
    )
    for bad in ("0", "20001", "lots"):
        monkeypatch.setenv("VICAR_MAX_ANSWER_CHARS", bad)
        result = runner.invoke(app, ["answer", "no-such-gate", "correct", "x"])
        assert result.exit_code == 2
        assert "VICAR_MAX_ANSWER_CHARS must be a whole number from 1 to 20000" in error_line(result)


async def test_the_gate_refuses_a_1mb_answer_and_stores_one_just_under_the_limit(harness):
    h = harness
    p = h.principal()
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    # A client that skips validation (model_construct) still meets the gate's own limit.
    huge = HumanAnswer.model_construct(action="correct", text="x" * 1_000_000, responder=None)
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update("respond", huge, result_type=str)
    causes, cause = [], info.value.cause
    while cause is not None:
        causes.append(str(cause))
        cause = cause.cause
    assert "String should have at most 20000 characters" in " ".join(causes)  # refused, not a task failure
    details = await wait_escalated(h.client, req.gate_id)
    assert details.status is GateStatus.escalated  # still waiting: nothing was consumed

    text = ("Why is the rollback missing? " * 1000)[: DEFAULT_LIMITS.answer_text - 1]
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="correct", text=text, responder="tester"))
    result = await handle.result()
    assert result.text == text and result.answered_by.value == "human"
    history = [ev.event_type async for ev in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in history
    [chunk] = h.registry.get(p).store.chunks()
    assert chunk.human_response == text
    [(_, stored)] = h.registry.get(p).store.outcomes()
    assert json.loads(stored)["response_text"] == text
