"""The audit trail from a client (docs/audit.md): a principal's gate records, a page at a
time, and a review of an answer the proxy gave alone. What `vicar audit export` and
`vicar review` use; an orchestrator can call them with its own client (built with
vicar.runtime.codec.data_converter, as every Vicar client is)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from vicar import contracts as c
from vicar.errors import NO_MEMORY, Conflict, NotFound, NotResponding, NotReviewable, VicarError
from vicar.memory.names import check_principal
from vicar.models.audit import DEFAULT_PAGE_BYTES, AuditCursor, AuditPage, AuditPageRequest, ReviewRequest, ReviewResult
from vicar.runtime.key_check import check_workflow_opens
from vicar.settings import TASK_QUEUE
from vicar.workflows import search_attributes as sa

# A page's workflow ends within this (its steps retry a few times, then fail with why).
PAGE_TIMEOUT = timedelta(minutes=10)


async def check_worker(client: Client, task_queue: str) -> None:
    """A page or a review is a workflow: with no worker on the queue it would wait for one
    (up to its timeout) instead of saying so."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    pollers = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    if not pollers.pollers:
        raise NotResponding(f"no worker polls the task queue {task_queue!r}: start one with `vicar worker`")


async def audited_principals(client: Client, task_queue: str = TASK_QUEUE) -> list[str]:
    """Every principal with a brain on this deployment's queue, from visibility."""
    prefix = c.brain_workflow_id("")
    found = set()
    async for wf in client.list_workflows(f'WorkflowType = "{c.BRAIN_WORKFLOW}" AND TaskQueue = "{task_queue}"'):
        try:
            found.add(check_principal(wf.id.removeprefix(prefix)))
        except ValueError:
            continue  # not a brain Vicar started
    return sorted(found)


async def audit_pages(
    client: Client,
    principal: str,
    *,
    since: datetime | None = None,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    task_queue: str = TASK_QUEUE,
) -> AsyncIterator[AuditPage]:
    """The principal's records, oldest first, page by page. NotFound if this deployment
    holds no memory of theirs; NotResponding if no worker runs."""
    await check_worker(client, task_queue)
    # Keys other than the workers' would have the page's start refused: say so, sending nothing.
    await check_workflow_opens(client, c.brain_workflow_id(principal), f"{principal}'s brain")
    cursor = AuditCursor()
    while True:
        req = AuditPageRequest(principal=principal, after=cursor, since=since, max_bytes=page_bytes)
        page = await _page(client, req, task_queue)
        yield page
        if page.done:
            return
        cursor = page.cursor


async def _page(client: Client, req: AuditPageRequest, task_queue: str) -> AuditPage:
    try:
        return await client.execute_workflow(
            c.AUDIT_WORKFLOW,
            req,
            id=c.audit_workflow_id(req.principal, uuid.uuid4().hex),
            task_queue=task_queue,
            result_type=AuditPage,
            execution_timeout=PAGE_TIMEOUT,
        )
    except WorkflowFailureError as exc:
        if getattr(_innermost(exc), "type", None) == NO_MEMORY:
            raise NotFound(_why(exc)) from None
        raise VicarError(f"the audit trail of {req.principal} cannot be read: {_why(exc)}") from None


def _innermost(exc: WorkflowFailureError) -> Any:
    cause: Any = exc.cause
    while getattr(cause, "cause", None) is not None and not getattr(cause, "type", None):
        cause = cause.cause  # the activity's ApplicationError, under its ActivityError
    return cause


def _why(exc: WorkflowFailureError) -> str:
    cause = _innermost(exc)
    return " ".join(str(getattr(cause, "message", None) or cause or exc).split())


async def review_gate(
    client: Client,
    gate: str,
    verdict: str,
    reviewer: str,
    *,
    note: str = "",
    principal: str | None = None,
    task_queue: str = TASK_QUEUE,
) -> ReviewResult:
    """Record a review of an answer the proxy gave alone (`gate`: its gate id or workflow
    id; `principal` for a gate Temporal no longer holds). Raises NotFound (3),
    NotReviewable (16: not answered by the proxy alone) or Conflict (5: reviewed
    otherwise already, or a reviewer the allow-list refuses)."""
    from vicar.client.gates import find_gate

    try:
        handle, desc = await find_gate(client, gate)
        workflow_id = handle.id
        principal = principal or desc.typed_search_attributes.get(sa.PRINCIPAL)
    except NotFound:
        if principal is None:
            raise NotFound(f"no gate {gate!r} (for a gate Temporal no longer holds, give its principal)") from None
        workflow_id = gate if gate.startswith(c.gate_workflow_id("")) else c.gate_workflow_id(gate)
    if not principal:
        raise NotFound(f"gate {gate!r} names no principal; give it")
    req = ReviewRequest(
        principal=principal, gate_workflow_id=workflow_id, verdict=verdict, reviewer=reviewer, note=note
    )
    await check_worker(client, task_queue)
    # The brain's current run, not the gate: a gate reviewed long after may hold a key
    # rotated out since, while the review itself needs only the workers' keys of today.
    await check_workflow_opens(client, c.brain_workflow_id(principal), f"{principal}'s brain")
    try:
        result: ReviewResult = await client.execute_workflow(
            c.REVIEW_WORKFLOW,
            req,
            id=c.review_workflow_id(uuid.uuid4().hex),
            task_queue=task_queue,
            result_type=ReviewResult,
            execution_timeout=PAGE_TIMEOUT,  # a review never waits without end
        )
    except WorkflowFailureError as exc:
        raise VicarError(f"the review of {gate} was not recorded: {_why(exc)}") from None
    if result.refusal == "not_found":
        raise NotFound(result.why)
    if result.refusal == "not_autonomous":
        raise NotReviewable(result.why)
    if result.refusal:
        raise Conflict(result.why)
    return result
