"""Client-side gate operations shared by the CLI, the demo and the tests."""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from vicar import contracts as c
from vicar.config import TASK_QUEUE
from vicar.errors import VicarError
from vicar.models import QUESTION_ACTIONS, VALID_ACTIONS, check_principal, GateDetails, GateRequest, GateResult, GateStatus, HumanAnswer
from workflows import search_attributes as sa


async def start_gate(client: Client, req: GateRequest, task_queue: str = TASK_QUEUE) -> WorkflowHandle:
    try:
        return await client.start_workflow(
            c.GATE_WORKFLOW, req, id=c.gate_workflow_id(req.gate_id), task_queue=task_queue,
            result_type=GateResult,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            # With a worker in this process, the first workflow task comes back inline.
            request_eager_start=True,
            search_attributes=TypedSearchAttributes([
                SearchAttributePair(sa.STATUS, GateStatus.queued.value),
                SearchAttributePair(sa.PRINCIPAL, req.principal),
                SearchAttributePair(sa.STATE, req.state.value),
                SearchAttributePair(sa.TASK_TYPE, req.task_type),
            ]),
        )
    except WorkflowAlreadyStartedError:
        raise VicarError(f"gate {req.gate_id!r} already exists; gate ids are unique") from None


async def gate_details(client: Client, gate_id: str) -> GateDetails | None:
    handle = client.get_workflow_handle(c.gate_workflow_id(gate_id))
    try:
        return await handle.query("details", result_type=GateDetails)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise VicarError(f"no gate {gate_id!r}") from None
        raise


def check_action(action: str) -> None:
    """Refuse an unknown action before anything touches the network."""
    valid = sorted({a.value for acts in VALID_ACTIONS.values() for a in acts} | {a.value for a in QUESTION_ACTIONS})
    if action not in valid:
        raise VicarError(f"unknown action {action!r}; valid actions: {', '.join(valid)}")


async def answer_gate(client: Client, gate_id: str, answer: HumanAnswer) -> str:
    """Answer an escalated gate through the `respond` update, so a bad answer gets an
    error back instead of silence. The responder is required (the gate refuses an
    answer without one too) and checked there against the principal's allow-list."""
    check_action(answer.action)
    if not answer.responder:
        raise VicarError("an answer needs a responder: who is answering")
    handle = client.get_workflow_handle(c.gate_workflow_id(gate_id))
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise VicarError(f"no gate {gate_id!r}") from None
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise VicarError(f"gate {gate_id!r} is not waiting for an answer (it is {desc.status.name.lower()})")
    try:
        return await handle.execute_update("respond", answer, result_type=str)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise VicarError(f"gate {gate_id!r} refused the answer: {getattr(cause, 'message', cause)}") from None


async def list_escalations(client: Client, principal: str | None = None) -> list[GateDetails]:
    query = f'VicarStatus = "{GateStatus.escalated.value}" AND ExecutionStatus = "Running"'
    if principal:
        check_principal(principal)  # also keeps quotes out of the visibility query
        query += f' AND VicarPrincipal = "{principal}"'
    out = []
    async for wf in client.list_workflows(query):
        try:
            details = await client.get_workflow_handle(wf.id, run_id=wf.run_id).query(
                "details", result_type=GateDetails)
        except RPCError:
            continue  # finished between the list and the query
        if details is not None and details.status is GateStatus.escalated:
            out.append(details)
    return out
