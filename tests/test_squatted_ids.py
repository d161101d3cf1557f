"""Vicar's ids taken by starts without the key. Anyone who may start a workflow in the
namespace can start one at `vicar-brain/<principal>` or `vicar-gate/<id>`: another
workflow type at a brain's id turned the proxy off for that principal (each gate: "brain
unusable") until an operator terminated it, and a gate id taken by a start the gate
refused could never be that gate. The worker refuses another type at Vicar's ids on its
queue at once; what it cannot refuse (another task queue, a start the gate refused)
`vicar health` names, with the command that frees the id."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from vicar import contracts as c
from vicar.cli import app
from vicar.client.gates import start_gate
from vicar.errors import Conflict

from .conftest import wait_for
from .test_bad_input import cli_env  # noqa: F401 (a fixture)
from .test_gate import run_answering

runner = CliRunner()


async def health(principal: str) -> str:
    result = await asyncio.to_thread(runner.invoke, app, ["health", principal])
    return " ".join(result.output.split())


async def plain_client(h) -> Client:
    """A client without the payload key (any SDK, the `temporal` CLI)."""
    return await Client.connect(h.client.service_client.config.target_host, namespace=h.client.namespace)


async def test_another_type_at_a_brain_id_on_the_queue_is_refused_and_the_proxy_works(harness):
    h = harness
    p = h.principal()
    squatter = await (await plain_client(h)).start_workflow(
        "Squatter", "x", id=c.brain_workflow_id(p), task_queue=h.task_queue
    )
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(squatter.result(), 30)
    assert "is not a Vicar workflow" in str(info.value.cause)
    result = await run_answering(h, h.request(p, artifact="Add a column; rollback: drop it."))
    assert result.calibration_guard != "proxy_error", result.calibration_note  # not "brain unusable"
    assert result.action.value == "approve"


async def test_health_names_a_brain_id_held_elsewhere_and_how_to_free_it(cli_env, harness, monkeypatch):
    h = harness
    monkeypatch.setenv("VICAR_TASK_QUEUE", h.task_queue)
    p = h.principal()
    plain = await plain_client(h)
    squatter = await plain.start_workflow("Squatter", "x", id=c.brain_workflow_id(p), task_queue="nobody-polls-this")
    said = await health(p)
    assert f"The proxy is off for {p}" in said, said
    assert "'Squatter' workflow, not a brain" in said and "'nobody-polls-this'" in said, said
    assert f"temporal workflow terminate --workflow-id {c.brain_workflow_id(p)}" in said, said
    await squatter.terminate(reason="not a Vicar brain")  # what health says to do
    result = await run_answering(h, h.request(p, artifact="Add a column; rollback: drop it."))
    assert result.calibration_guard != "proxy_error", result.calibration_note
    said = await health(p)
    assert "The proxy is off" not in said, said


async def test_health_names_gate_ids_that_can_never_be_their_gate(cli_env, harness, monkeypatch):
    h = harness
    monkeypatch.setenv("VICAR_TASK_QUEUE", h.task_queue)
    p = h.principal()
    plain = await plain_client(h)
    req = h.request(p, artifact="Rename a table.")
    # The very request, not sealed: the gate refuses it in its first task.
    refused = await plain.start_workflow(
        c.GATE_WORKFLOW, req.model_dump(mode="json"), id=c.gate_workflow_id(req.gate_id), task_queue=h.task_queue
    )
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(refused.result(), 30)
    other = f"g-{uuid.uuid4().hex[:10]}"
    squatter = await plain.start_workflow("Squatter", "x", id=c.gate_workflow_id(other), task_queue=h.task_queue)
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(squatter.result(), 30)  # refused by the worker at once
    # A gate where no worker of this deployment runs it: a start under its id waits on it.
    stranded = f"g-{uuid.uuid4().hex[:10]}"
    await plain.start_workflow(c.GATE_WORKFLOW, "x", id=c.gate_workflow_id(stranded), task_queue="nobody-polls-this")
    # The id is taken for good: the start is refused, or attaches to the refused run.
    with pytest.raises((Conflict, WorkflowFailureError)):
        await asyncio.wait_for((await start_gate(h.client, req, h.task_queue)).result(), 30)

    async def both_listed():
        said = await health(p)
        ids = [c.gate_workflow_id(g) for g in (req.gate_id, other, stranded)]
        return said if all(i in said for i in ids) else None

    try:
        said = await wait_for(both_listed, timeout=90)  # visibility is eventually consistent
    except TimeoutError:
        raise AssertionError(f"not all listed: {await health(p)}") from None
    assert "Gate ids that cannot be used" in said, said
    assert f"{c.gate_workflow_id(req.gate_id)} was started with an input the gate refused" in said, said
    assert f"{c.gate_workflow_id(other)} is held by a 'Squatter' workflow, not a gate" in said, said
    assert f"temporal workflow delete --workflow-id {c.gate_workflow_id(req.gate_id)}" in said, said
    assert f"{c.gate_workflow_id(stranded)} is a gate on task queue 'nobody-polls-this', which no worker" in said, said
    # What it says to do frees the id: the gate starts and is answered.
    gone = WorkflowExecution(workflow_id=c.gate_workflow_id(req.gate_id))
    await h.client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(namespace=h.client.namespace, workflow_execution=gone)
    )

    async def deleted():
        try:
            await h.client.get_workflow_handle(gone.workflow_id).describe()
        except RPCError as exc:
            return exc.status == RPCStatusCode.NOT_FOUND
        return False

    await wait_for(deleted, timeout=60)
    result = await asyncio.wait_for(run_answering(h, req), 60)
    assert result.gate_id == req.gate_id and result.answered_by.value == "human"
