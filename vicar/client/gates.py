"""Client-side gate operations shared by the CLI, the demo and the tests."""

from __future__ import annotations

import asyncio
import json

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    GetWorkflowExecutionHistoryReverseRequest,
    ListWorkflowExecutionsRequest,
)
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from vicar import contracts as c
from vicar.errors import Conflict, InvalidInput, NotFound, NotResponding
from vicar.memory.text import clip
from vicar.models import (
    CfAState,
    GateDetails,
    GateRequest,
    GateResult,
    GateStatus,
    HumanAnswer,
    check_principal,
)
from vicar.models.view import excerpt_line
from vicar.models.vocabulary import QUESTION_ACTIONS, VALID_ACTIONS
from vicar.runtime.codec import REFUSED, AesGcmCodec, refusal_line
from vicar.runtime.key_check import check_opens
from vicar.runtime.tasks import wait_for
from vicar.settings import ANSWER_TIMEOUT, TASK_QUEUE
from vicar.workflows import search_attributes as sa


async def start_gate(client: Client, req: GateRequest, task_queue: str = TASK_QUEUE) -> WorkflowHandle:
    """Start the gate, or attach to it: the same request sent again (a retried call, a
    restarted orchestrator) gets the existing gate's handle, running or finished; a
    different request under the same gate id is a Conflict."""
    try:
        return await client.start_workflow(
            c.GATE_WORKFLOW,
            req,
            id=c.gate_workflow_id(req.gate_id),
            task_queue=task_queue,
            result_type=GateResult,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            # With a worker in this process, the first workflow task comes back inline.
            request_eager_start=True,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.STATUS, GateStatus.queued.value),
                    SearchAttributePair(sa.PRINCIPAL, req.principal),
                    SearchAttributePair(sa.STATE, req.state.value),
                    SearchAttributePair(sa.TASK_TYPE, req.task_type),
                ]
            ),
            # What the Temporal UI shows on the list and the gate's page; once escalated,
            # the gate's current details add the proxy's guess and the guard.
            static_summary=gate_summary(req),
            static_details=gate_how_to_answer(req),
        )
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle(c.gate_workflow_id(req.gate_id), result_type=GateResult)
        if await started_with(handle) != req:
            raise Conflict(
                f"gate {req.gate_id!r} already exists with a different request; gate ids are unique"
            ) from None
        return handle


# The UI shows a summary on one line of the list.
SUMMARY_CHARS = 200


def gate_summary(req: GateRequest) -> str:
    return clip(f"{req.principal} · {req.state.value} / {req.task_type}: {req.question}", SUMMARY_CHARS)


def gate_how_to_answer(req: GateRequest) -> str:
    actions = " | ".join(a.value for a in req.valid_actions)
    artifact = f"**Artifact:** {excerpt_line(req.artifact_text)}\n\n" if req.artifact_text.strip() else ""
    agent = f"**From agent:** {clip(req.upstream_agent, 200)}\n\n" if req.upstream_agent else ""
    return (
        f"**Question:** {clip(req.question, 2000)}\n\n{artifact}{agent}"
        f'Answer with `vicar answer {req.gate_id} ACTION "text"` (ACTION: {actions}), '
        f"or the `respond` update with a HumanAnswer. `vicar gate show {req.gate_id}` shows it all; "
        "`vicar escalations` lists what waits."
    )


async def started_with(handle: WorkflowHandle) -> GateRequest | None:
    """The request a gate was started with (its first history event), or None if that
    input is not a GateRequest."""
    async for event in handle.fetch_history_events():
        payloads = list(event.workflow_execution_started_event_attributes.input.payloads)
        codec = handle._client.data_converter.payload_codec  # history holds the sealed input
        if isinstance(codec, AesGcmCodec) and payloads:
            payloads = [codec.open(payloads[0])]  # a key this process lacks: one line (CodecKeyError)
        try:
            return GateRequest.model_validate_json(payloads[0].data) if payloads else None
        except ValueError:
            return None
    return None


async def find_gate(client: Client, gate_id: str) -> tuple[WorkflowHandle, WorkflowExecutionDescription]:
    """A gate by its gate id (workflow id `vicar-gate/<gate_id>`, as start_gate starts
    it) or by the workflow id another client started it under."""
    for workflow_id in dict.fromkeys((c.gate_workflow_id(gate_id), gate_id)):
        handle = client.get_workflow_handle(workflow_id)
        try:
            desc = await handle.describe()
        except RPCError as exc:
            if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                continue
            raise
        if desc.workflow_type == c.GATE_WORKFLOW:
            return handle, desc
    raise NotFound(f"no gate {gate_id!r}")


async def gate_details(client: Client, gate_id: str) -> GateDetails | None:
    handle, _ = await find_gate(client, gate_id)
    return await query_details(handle, gate_id)


async def query_details(handle: WorkflowHandle, gate_id: str) -> GateDetails | None:
    """The gate's `details` query, for a handle already found."""
    try:
        return await handle.query(c.DETAILS_QUERY, result_type=GateDetails)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"no gate {gate_id!r}") from None
        raise


def check_action(action: str) -> None:
    """Refuse an unknown action before anything touches the network."""
    valid = sorted({a.value for acts in VALID_ACTIONS.values() for a in acts} | {a.value for a in QUESTION_ACTIONS})
    if action not in valid:
        raise InvalidInput(f"unknown action {action!r}; valid actions: {', '.join(valid)}")


async def answer_gate(client: Client, gate_id: str, answer: HumanAnswer, timeout: float = ANSWER_TIMEOUT) -> str:
    """Answer an escalated gate through the `respond` update, so a bad answer gets an
    error back instead of silence. The responder is required (the gate refuses an
    answer without one too) and checked there against the principal's allow-list.
    Every way of losing (another answer first, the gate closing meanwhile, a gate whose
    workflow task cannot run) ends in one VicarError."""
    check_action(answer.action)
    if not answer.responder:
        raise InvalidInput("an answer needs a responder: who is answering")
    handle, desc = await find_gate(client, gate_id)
    _refuse_closed(gate_id, desc)
    # Sealed with other keys than the workers', the answer would be refused by the gate.
    check_opens(
        client, desc.raw_description.workflow_execution_info.memo.fields.get(c.ESCALATION_MEMO), f"gate {gate_id!r}"
    )
    if (attempt := desc.raw_description.pending_workflow_task.attempt) > 1:
        # Sent now, the answer would wait for a recovery that may never come.
        raise NotResponding(f"gate {gate_id!r} cannot take an answer now: {await _why_stuck(client, desc, attempt)}")
    try:
        return await wait_for(handle.execute_update(c.RESPOND_UPDATE, answer, result_type=str), timeout)
    except WorkflowUpdateFailedError as exc:
        msg = str(getattr(exc.cause, "message", None) or exc.cause)
        if "already has a human answer" in msg or "status: done" in msg:
            raise Conflict(f"gate {gate_id!r} already answered: another answer came first") from None
        # e.g. "the Workflow completed before the Update completed": the other answer won.
        _refuse_closed(gate_id, await _describe(handle, gate_id))
        raise Conflict(f"gate {gate_id!r} refused the answer: {msg}") from None
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        desc = await _describe(handle, gate_id)
        _refuse_closed(gate_id, desc)
        why = await _why_stuck(client, desc, desc.raw_description.pending_workflow_task.attempt)
        raise NotResponding(
            f"gate {gate_id!r} did not take the answer within {timeout:g} s ({why}); "
            "it may still apply if the gate recovers: see `vicar escalations`"
        ) from None
    except RPCError as exc:
        # e.g. "workflow update was aborted by closing workflow": the other answer won.
        _refuse_closed(gate_id, await _describe(handle, gate_id))
        if exc.status == RPCStatusCode.FAILED_PRECONDITION:
            # The server refuses updates while the gate's workflow task is being retried
            # after a failure (WorkflowNotReady): the check above ran before that failure.
            raise NotResponding(
                f"gate {gate_id!r} cannot take an answer now: its workflow task failed and is being "
                "retried; try again shortly (see `vicar escalations`)"
            ) from None
        raise


# Answers in flight at once in a batch: a person's twenty gates go in about the time of a
# few, without a thousand updates at once on the server.
ANSWER_PARALLEL = 8


async def answer_gates(
    client: Client, gate_ids: list[str], answer: HumanAnswer, timeout: float = ANSWER_TIMEOUT
) -> list[str | Exception]:
    """The same answer to several gates over one client, each through `answer_gate` (the
    validated update); per gate, in order, the gate's reply or the error it raised."""
    slots = asyncio.Semaphore(ANSWER_PARALLEL)

    async def one(gate_id: str) -> str | Exception:
        async with slots:
            try:
                return await answer_gate(client, gate_id, answer, timeout)
            except Exception as exc:  # noqa: BLE001  (reported for this gate; the others go on)
                return exc

    return list(await asyncio.gather(*(one(g) for g in gate_ids)))


async def _describe(handle: WorkflowHandle, gate_id: str) -> WorkflowExecutionDescription:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"no gate {gate_id!r}") from None
        raise


def _refuse_closed(gate_id: str, desc: WorkflowExecutionDescription) -> None:
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        raise Conflict(f"gate {gate_id!r} is not waiting for an answer (it is completed): already answered")
    if desc.status != WorkflowExecutionStatus.RUNNING:
        status = desc.status.name.lower() if desc.status is not None else "in no known state"
        raise Conflict(f"gate {gate_id!r} is not waiting for an answer (it is {status})")


async def _why_stuck(client: Client, desc: WorkflowExecutionDescription, attempt: int) -> str:
    """Why a gate's workflow does not run: its last workflow task failure, or no worker."""
    if attempt > 1:
        history = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                maximum_page_size=50,
                execution=WorkflowExecution(workflow_id=desc.id, run_id=desc.run_id),
            )
        )
        last = next(
            (
                e
                for e in history.history.events
                if e.HasField("workflow_task_failed_event_attributes")
                or e.HasField("workflow_task_timed_out_event_attributes")
            ),
            None,
        )
        if last is not None and last.HasField("workflow_task_timed_out_event_attributes"):
            # Not a failure of the gate: its worker took the task and did not finish it
            # (stopped, frozen, overloaded); it runs again once a worker does.
            return f"its worker did not finish its workflow task in time (attempt {attempt})"
        failure = last.workflow_task_failed_event_attributes.failure.message if last is not None else ""
        return f"its workflow task keeps failing (attempt {attempt})" + (f": {clip(failure, 200)}" if failure else "")
    pollers = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=desc.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    if not pollers.pollers:
        return f"no worker polls its task queue {desc.task_queue!r}"
    return "its worker did not run it in time"


async def list_escalations(client: Client, principal: str | None = None) -> list[GateDetails]:
    """The running gates waiting for a human (of one principal, or all), oldest first,
    from visibility alone (search attributes and the memo the gate writes when it
    escalates): no worker needs to run. Only what is shown is decoded (the SDK's listing
    decodes every search attribute of every workflow, which took most of the inbox list's
    time at 1,000 gates, bench/INBOX_RESULTS.md), the memos in one codec call. A gate whose
    memo does not open here (sealed with a key this process lacks, e.g. one dropped in a
    rotation, or a workflow that is not a gate) is listed from its search attributes,
    saying why: one such gate must not take the list down for everyone."""
    query = f'VicarStatus = "{GateStatus.escalated.value}" AND ExecutionStatus = "Running"'
    if principal:
        check_principal(principal)  # also keeps quotes out of the visibility query
        query += f' AND VicarPrincipal = "{principal}"'
    memos: list[Payload] = []
    ids: list[tuple[str, dict[str, Payload]]] = []
    bare: list[tuple[str, dict[str, Payload]]] = []  # no memo: not escalated by a gate
    token = b""
    while True:
        page = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace, query=query, page_size=LIST_PAGE, next_page_token=token
            )
        )
        for ex in page.executions:
            memo = ex.memo.fields.get(c.ESCALATION_MEMO)
            attrs = dict(ex.search_attributes.indexed_fields)
            if memo is not None:
                memos.append(memo)
                ids.append((ex.execution.workflow_id, attrs))
            else:
                bare.append((ex.execution.workflow_id, attrs))
        token = page.next_page_token
        if not token:
            break
    codec = client.data_converter.payload_codec
    if codec and memos:
        memos = list(await codec.decode(memos))
    out = []
    for (wid, attrs), p in zip(ids, memos):
        if p.metadata.get("encoding") == REFUSED:
            out.append(_from_attributes(wid, attrs, f"{UNREADABLE}{refusal_line(p)})"))
            continue
        try:
            out.append(GateDetails.model_validate_json(p.data).model_copy(update={"workflow_id": wid}))
        except ValueError:  # not what a gate writes (a workflow someone else started)
            out.append(_from_attributes(wid, attrs, f"{UNREADABLE}not a gate's summary)"))
    for wid, attrs in bare:
        out.append(_from_attributes(wid, attrs, f"{UNREADABLE}no summary)"))
    return sorted(out, key=lambda d: d.escalated_at.timestamp() if d.escalated_at else 0.0)


def _keyword(attrs: dict[str, Payload], name: str) -> str | None:
    p = attrs.get(name)
    try:
        value = json.loads(p.data) if p is not None else None
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _from_attributes(workflow_id: str, attrs: dict[str, Payload], question: str) -> GateDetails:
    state = _keyword(attrs, sa.STATE.name)
    return GateDetails(
        gate_id=workflow_id.removeprefix(c.gate_workflow_id("")),
        workflow_id=workflow_id,
        status=GateStatus.escalated,
        principal=_keyword(attrs, sa.PRINCIPAL.name) or "?",
        state=state if state in CfAState.__members__ else CfAState.PLAN_ASSERT,
        task_type=_keyword(attrs, sa.TASK_TYPE.name) or "?",
        question=clip(question, UNREADABLE_CHARS),
    )


LIST_PAGE = 1000


# The question shown for a gate whose summary does not open here.
UNREADABLE, UNREADABLE_CHARS = "(summary unreadable: ", 400
