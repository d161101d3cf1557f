"""Vicar's ids held by workflows that are not Vicar's, found from Temporal (for `vicar
health`). Anyone who may start workflows in the namespace can start one at
`vicar-brain/<principal>` or `vicar-gate/<id>` without the payload key:

- a brain id held by a run that is not a working brain of this deployment (another
  workflow type, another task queue, a workflow task that keeps failing) turns the proxy
  off for that principal: each of its gates asks the person, saying "brain unusable".
  The worker refuses another type on its own task queue at once (workflows/foreign.py);
  elsewhere the run stays until it is terminated, and the next gate starts a good brain;
- a gate id is used once (gates are started with REJECT_DUPLICATE, so a retried start
  attaches to its gate): one held by another type, or by a start whose input the gate
  refused (not sealed with the key, not a gate request), can never be that gate. Deleting
  the run frees the id.

Each finding is one line that says what holds the id and the command that frees it."""

from __future__ import annotations

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    GetWorkflowExecutionHistoryReverseRequest,
    ListWorkflowExecutionsRequest,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from vicar import contracts as c
from vicar.errors import INVALID_GATE_REQUEST, INVALID_WORKFLOW_INPUT, REFUSED_PAYLOAD, InvalidInput
from vicar.runtime.codec import ENCODING

GATE_IDS_SHOWN = 10


def check_task_queue(task_queue: str) -> None:
    """A task queue name that can stand in a visibility query's quotes."""
    if '"' in task_queue or "\\" in task_queue or not task_queue.isprintable():
        raise InvalidInput(f"invalid task queue {task_queue[:80]!r}")


# The failures of a gate's first task that mean its start was not a gate of this deployment.
REFUSED_STARTS = (INVALID_GATE_REQUEST, INVALID_WORKFLOW_INPUT, REFUSED_PAYLOAD)


async def _start(client: Client, workflow_id: str, run_id: str):
    """The run's started event (its first)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        return event.workflow_execution_started_event_attributes
    return None


async def brain_squatter(client: Client, principal: str, task_queue: str) -> str | None:
    """Why the principal's brain id is held by something that is not a working brain of
    this deployment, and how to free it (None: free, or a working brain)."""
    wid = c.brain_workflow_id(principal)
    try:
        desc = await client.get_workflow_handle(wid).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return None  # a closed run holds nothing: the next gate starts a brain
    ours = desc.workflow_type == c.BRAIN_WORKFLOW
    what = ["a brain" if ours else f"a {desc.workflow_type[:100]!r} workflow, not a brain"]
    if desc.task_queue != task_queue:
        what.append(
            f"on task queue {desc.task_queue[:100]!r}, which this deployment does not serve (it serves {task_queue!r})"
        )
    started = await _start(client, wid, desc.run_id or "")
    payloads = list(started.input.payloads) if started is not None else []
    if payloads and payloads[0].metadata.get("encoding") != ENCODING and client.data_converter.payload_codec:
        what.append("started with an input not sealed with the payload key")
    attempt = desc.raw_description.pending_workflow_task.attempt
    if desc.raw_description.HasField("pending_workflow_task") and attempt > 2:
        what.append(f"whose workflow task has failed {attempt - 1} times")
    if ours and len(what) == 1:
        return None  # a working brain of this deployment
    who = f", started by {started.identity[:100]!r}" if started is not None and started.identity else ""
    return (
        f"The proxy is off for {principal}: its brain's id {wid} is held by {', '.join(what)}{who}. Every gate of "
        f"{principal} goes to the person until it is gone: `temporal workflow terminate --workflow-id {wid} "
        f"--reason 'not a Vicar brain'` (the next gate starts a good brain; docs/operations.md)"
    )


async def _list(client: Client, query: str, limit: int) -> list[tuple[str, str, str]]:
    """(workflow id, run id, type) of the runs the visibility query finds, at most `limit`."""
    resp = await client.workflow_service.list_workflow_executions(
        ListWorkflowExecutionsRequest(namespace=client.namespace, query=query, page_size=limit)
    )
    return [(e.execution.workflow_id, e.execution.run_id, e.type.name) for e in resp.executions][:limit]


async def _polled(client: Client, queue: str) -> bool:
    """Whether any worker polls the queue's workflow tasks now."""
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(resp.pollers)


async def _refused_start(client: Client, workflow_id: str, run_id: str) -> str | None:
    """The reason a failed gate's start was refused, if that is why it failed."""
    history = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            maximum_page_size=1,
        )
    )
    for event in history.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            if failure.application_failure_info.type in REFUSED_STARTS:
                return failure.message
    return None


async def gate_squatters(client: Client, task_queue: str, limit: int = GATE_IDS_SHOWN) -> list[str]:
    """The gate ids that can never be their gate: held by another workflow type, by a
    gate on a task queue no worker polls (a start under its id attaches to it and waits
    for ever; another deployment's gates, on a queue its workers poll, are not listed),
    or by a start the gate refused; each with how to free it."""
    prefix = c.gate_workflow_id("")
    out = []
    other = f'WorkflowId STARTS_WITH "{prefix}" AND WorkflowType != "{c.GATE_WORKFLOW}"'
    for wid, _, kind in await _list(client, other, limit):
        out.append(
            f"{wid} is held by a {kind[:100]!r} workflow, not a gate: `temporal workflow delete --workflow-id {wid}`"
        )
    check_task_queue(task_queue)
    elsewhere = (
        f'WorkflowId STARTS_WITH "{prefix}" AND WorkflowType = "{c.GATE_WORKFLOW}" '
        f'AND ExecutionStatus = "Running" AND TaskQueue != "{task_queue}"'
    )
    polled: dict[str, bool] = {}
    for wid, run_id, _ in await _list(client, elsewhere, 100):
        if len(out) >= limit:
            break
        queue = (await client.get_workflow_handle(wid, run_id=run_id).describe()).task_queue
        if queue not in polled and len(polled) < limit:
            polled[queue] = await _polled(client, queue)
        if polled.get(queue) is False:
            out.append(
                f"{wid} is a gate on task queue {queue[:100]!r}, which no worker polls: nothing runs it, and a "
                f"start under its id waits on it: `temporal workflow terminate --workflow-id {wid}`, then delete it"
            )
    failed = f'WorkflowId STARTS_WITH "{prefix}" AND WorkflowType = "{c.GATE_WORKFLOW}" AND ExecutionStatus = "Failed"'
    for wid, run_id, _ in await _list(client, failed, 100):
        if len(out) >= limit:
            break
        if why := await _refused_start(client, wid, run_id):
            out.append(
                f"{wid} was started with an input the gate refused ({' '.join(why.split())[:160]}): "
                f"`temporal workflow delete --workflow-id {wid}`"
            )
    return out
