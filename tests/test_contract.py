"""The contract with orchestrators that are not Vicar's own client: bad input fails the
gate at once, and a gate started under any workflow id is answered by that id."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import jsonschema
import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.client.gates import answer_gate, find_gate, list_escalations
from vicar.client.schema import document
from vicar.errors import INVALID_GATE_REQUEST, NotFound
from vicar.models import GateResult, HumanAnswer
from vicar.runtime.server import temporal_binary

from .conftest import wait_escalated, wait_for
from .test_codec import codec_server  # noqa: F401  (a fixture: the codec server as a process)

# Well under the SDK's first workflow-task retry back-off: the gate fails in its first task.
FAILS_WITHIN = 15.0


@pytest.mark.parametrize(
    "payload, where",
    [
        ({"taskType": "db-migration"}, "taskType: Extra inputs are not permitted"),
        ({"state": "SHIP_IT"}, "state: Input should be"),
        ({"question": ""}, "question: String should have at least 1 character"),
    ],
)
async def test_a_bad_request_from_any_client_fails_the_gate_at_once(harness, payload, where):
    h = harness
    good = h.request(h.principal()).model_dump(mode="json")
    if "taskType" in payload:
        good["taskType"] = good.pop("task_type")  # the typo, as a client in another language makes it
    else:
        good.update(payload)
    # A plain dict, not a GateRequest: what a client without Vicar's models sends.
    handle = await h.client.start_workflow(
        c.GATE_WORKFLOW, good, id=f"raw-{uuid.uuid4().hex[:8]}", task_queue=h.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), FAILS_WITHIN)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == INVALID_GATE_REQUEST and cause.non_retryable
    assert cause.message.startswith("invalid gate request: ") and where in cause.message
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED  # the UI shows it as Failed


async def test_a_gate_started_under_another_id_is_listed_and_answered_by_it(harness):
    h = harness
    p = h.principal()
    req = h.request(p, escalation_mode="always")
    workflow_id = f"orchestrator/run-{uuid.uuid4().hex[:6]}/plan-gate"
    handle = await h.client.start_workflow(
        c.GATE_WORKFLOW, req, id=workflow_id, task_queue=h.task_queue, result_type=GateResult
    )
    details = await wait_escalated(h.client, workflow_id)
    assert details.gate_id == req.gate_id and details.workflow_id == workflow_id

    async def listed():  # visibility is eventually consistent
        return [(d.gate_id, d.workflow_id) for d in await list_escalations(h.client, p)]

    assert await wait_for(listed) == [(req.gate_id, workflow_id)]
    with pytest.raises(NotFound):
        await find_gate(h.client, req.gate_id)  # vicar-gate/<gate_id> does not exist: not guessed
    await answer_gate(h.client, workflow_id, HumanAnswer(action="approve", text="go", responder="test"))
    result = await handle.result()
    assert result.action.value == "approve" and result.escalated and result.responder == "test"


def _temporal(client, codec, *args: str) -> str:
    """One `temporal` CLI command against the test server, as a client in another language
    would drive the gate: JSON in, JSON out. Payloads are sealed (docs/codec.md): such a
    client reaches them through the codec server, as `--codec-endpoint` does here."""
    url, token, _ = codec
    run = subprocess.run(
        [
            temporal_binary(),
            *args,
            "--address",
            client.service_client.config.target_host,
            "--namespace",
            client.namespace,
            "-o",
            "json",
            "--codec-endpoint",
            url,
            "--codec-auth",
            f"Bearer {token}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


async def test_the_temporal_cli_opens_and_answers_a_gate_with_json_only(harness, codec_server):
    h = harness
    doc = document()
    request = {
        "principal": h.principal(),
        "gate_id": f"cli-{uuid.uuid4().hex[:8]}",
        "state": "PLAN_ASSERT",
        "task_type": "db-migration",
        "question": "Approve the migration plan?",
        "escalation_mode": "always",
    }
    jsonschema.validate(request, doc["schemas"]["GateRequest"])  # what `vicar schema` promises is accepted
    workflow_id = doc["interface"]["workflow_id"].split()[0].replace("<gate_id>", request["gate_id"])
    await asyncio.to_thread(
        _temporal,
        h.client,
        codec_server,
        "workflow",
        "start",
        "--type",
        doc["interface"]["workflow_type"],
        "--task-queue",
        h.task_queue,
        "--workflow-id",
        workflow_id,
        "--input",
        json.dumps(request),
    )
    await wait_escalated(h.client, request["gate_id"])
    answer = {"action": "approve", "text": "Fine by me.", "responder": "cli"}
    jsonschema.validate(answer, doc["schemas"]["HumanAnswer"])
    (name,) = doc["interface"]["updates"]
    await asyncio.to_thread(
        _temporal,
        h.client,
        codec_server,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        workflow_id,
        "--name",
        name,
        "--input",
        json.dumps(answer),
    )
    out = json.loads(
        await asyncio.to_thread(_temporal, h.client, codec_server, "workflow", "result", "--workflow-id", workflow_id)
    )
    assert (out["result"]["action"], out["result"]["responder"], out["result"]["escalated"]) == ("approve", "cli", True)
    # The payload itself, as any SDK receives it (the CLI renders an empty list as null).
    raw = await h.client.get_workflow_handle(workflow_id, result_type=RawValue).result()
    result = json.loads(raw.payload.data)
    jsonschema.validate(result, doc["schemas"]["GateResult"])
    assert result["gate_id"] == request["gate_id"] and result["dialog"] == []


def test_schema_and_version_commands(tmp_path):
    from importlib.metadata import version

    from typer.testing import CliRunner

    from vicar.cli import app
    from vicar.models import GateRequest

    runner = CliRunner()
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.stdout.strip() == f"vicar {version('vicar')}"
    printed = runner.invoke(app, ["schema"])
    assert printed.exit_code == 0
    doc = json.loads(printed.stdout)  # stdout is JSON only
    assert doc["interface"]["workflow_type"] == c.GATE_WORKFLOW
    assert runner.invoke(app, ["schema", "--out", str(tmp_path)]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["interface.json", *(f"{n}.json" for n in doc["schemas"])]
    )
    assert json.loads((tmp_path / "GateRequest.json").read_text()) == GateRequest.model_json_schema()
