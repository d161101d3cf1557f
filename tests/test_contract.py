"""The contract with orchestrators that are not Vicar's own client: bad input fails the
gate at once, and a gate started under any workflow id is answered by that id."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.errors import INVALID_GATE_REQUEST, NotFound
from vicar.gates import answer_gate, find_gate, list_escalations
from vicar.models import GateResult, HumanAnswer

from .conftest import wait_escalated

# Well under the SDK's first workflow-task retry back-off: the gate fails in its first task.
FAILS_WITHIN = 15.0


@pytest.mark.parametrize("payload, where", [
    ({"taskType": "db-migration"}, "taskType: Extra inputs are not permitted"),
    ({"state": "SHIP_IT"}, "state: Input should be"),
    ({"question": ""}, "question: String should have at least 1 character"),
])
async def test_a_bad_request_from_any_client_fails_the_gate_at_once(harness, payload, where):
    h = harness
    good = h.request(h.principal()).model_dump(mode="json")
    if "taskType" in payload:
        good["taskType"] = good.pop("task_type")  # the typo, as a client in another language makes it
    else:
        good.update(payload)
    # A plain dict, not a GateRequest: what a client without Vicar's models sends.
    handle = await h.client.start_workflow(c.GATE_WORKFLOW, good, id=f"raw-{uuid.uuid4().hex[:8]}",
                                           task_queue=h.task_queue)
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
    handle = await h.client.start_workflow(c.GATE_WORKFLOW, req, id=workflow_id, task_queue=h.task_queue,
                                           result_type=GateResult)
    details = await wait_escalated(h.client, workflow_id)
    assert details.gate_id == req.gate_id and details.workflow_id == workflow_id
    listed = [d for d in await list_escalations(h.client, p)]
    assert [(d.gate_id, d.workflow_id) for d in listed] == [(req.gate_id, workflow_id)]
    with pytest.raises(NotFound):
        await find_gate(h.client, req.gate_id)  # vicar-gate/<gate_id> does not exist: not guessed
    await answer_gate(h.client, workflow_id, HumanAnswer(action="approve", text="go", responder="test"))
    result = await handle.result()
    assert result.action.value == "approve" and result.escalated and result.responder == "test"
