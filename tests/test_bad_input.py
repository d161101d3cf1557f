"""Bad input gets a clear one-line error, and nothing starts or changes."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.worker import Worker
from typer.testing import CliRunner

from vicar import contracts as c
from vicar.cli import app
from vicar.client.gates import gate_details, start_gate
from vicar.models import HumanAnswer
from vicar.models.brain import BrainConfig, BrainInput, TurnRequest
from vicar.runtime.server import free_port

from .conftest import DeafGate, wait_escalated, wait_for
from .test_gate import run_answering

runner = CliRunner()


@pytest.fixture
def cli_env(monkeypatch, temporal_env, settings):
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output  # one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


async def gate_exists(client, gate_id: str) -> bool:
    try:
        await client.get_workflow_handle(c.gate_workflow_id(gate_id)).describe()
        return True
    except RPCError:
        return False


async def test_invalid_gate_request_is_refused_before_any_workflow(cli_env, temporal_env, tmp_path):
    gid = f"g-{uuid.uuid4().hex[:8]}"
    result = await asyncio.to_thread(
        runner.invoke,
        app,
        [
            "gate",
            "start",
            "--principal",
            "not a name",
            "--gate-id",
            gid,
            "--state",
            "PLAN_ASSERT",
            "--task-type",
            "docs",
            "--question",
            "Approve?",
        ],
    )
    assert result.exit_code == 2
    assert "principal" in error_line(result)
    spec = tmp_path / "gate.json"
    spec.write_text(json.dumps({"principal": "alice", "gate_id": gid, "state": "PLAN_ASSERT"}))
    result = await asyncio.to_thread(runner.invoke, app, ["gate", "start", str(spec)])
    line = error_line(result)
    assert "task_type: Field required" in line and "question: Field required" in line
    spec.write_text("{not json")
    assert "not valid JSON" in error_line(await asyncio.to_thread(runner.invoke, app, ["gate", "start", str(spec)]))
    assert not await gate_exists(temporal_env.client, gid)


async def test_unknown_action_is_refused_with_the_valid_actions(cli_env, harness):
    h = harness
    p = h.principal()
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)

    await wait_escalated(h.client, req.gate_id)
    result = await asyncio.to_thread(runner.invoke, app, ["answer", req.gate_id, "maybe", "hmm"])
    assert result.exit_code == 2
    assert "valid actions: answer, approve, correct, dialog, hold, reject, withdraw" in error_line(result)
    # The gate's own validator refuses it too, for callers that skip the CLI.
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update("respond", HumanAnswer(action="maybe"), result_type=str)
    assert "valid actions: approve" in str(info.value.cause)
    # A good answer still goes through afterwards: nothing was consumed by the bad ones.
    result = await asyncio.to_thread(runner.invoke, app, ["answer", req.gate_id, "approve", "ok"])
    assert result.exit_code == 0, result.output
    assert (await handle.result()).action.value == "approve"


async def test_answering_a_gate_that_is_not_waiting_is_refused(cli_env, harness):
    h = harness
    p = h.principal()
    done = await run_answering(h, h.request(p))
    result = await asyncio.to_thread(runner.invoke, app, ["answer", done.gate_id, "approve"])
    assert "is not waiting for an answer (it is completed)" in error_line(result)
    result = await asyncio.to_thread(runner.invoke, app, ["answer", "no-such-gate", "approve"])
    assert "no gate 'no-such-gate'" in error_line(result)

    # A gate still queued for its turn (a deaf gate holds the principal's attention).
    q = h.principal()
    deaf_queue = f"deaf-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=deaf_queue, workflows=[DeafGate]):
        deaf = await h.client.start_workflow(DeafGate.run, id=f"deaf-{uuid.uuid4().hex[:8]}", task_queue=deaf_queue)
        await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=q, config=BrainConfig()),
            id=c.brain_workflow_id(q),
            task_queue=h.task_queue,
            start_signal="request_turn",
            start_signal_args=[TurnRequest(gate_id="deaf", workflow_id=deaf.id)],
        )
        await wait_for(lambda: deaf.query(DeafGate.has_turn))
        req = h.request(q)
        handle = await start_gate(h.client, req, h.task_queue)
        await wait_for(lambda: gate_details(h.client, req.gate_id))
        result = await asyncio.to_thread(runner.invoke, app, ["answer", req.gate_id, "approve"])
        assert "not waiting for a human answer (status: queued)" in error_line(result)
        await handle.terminate()
        await deaf.terminate()


def test_unreachable_server_is_one_clear_line(monkeypatch, settings):
    monkeypatch.setenv("TEMPORAL_ADDRESS", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    result = runner.invoke(app, ["escalations"])
    assert result.exit_code == 4
    assert "cannot reach Temporal at 127.0.0.1:" in error_line(result)


def test_memory_stats_of_an_unknown_principal(monkeypatch, settings):
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    assert "no memory for principal 'nobody'" in error_line(runner.invoke(app, ["memory", "stats", "nobody"]))
