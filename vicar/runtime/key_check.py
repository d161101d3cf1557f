"""Can this client open what the workers sealed? A client with other keys than the
workers' would have every write refused by the worker, found only there; it is refused here
instead, in one line naming the workers' key, and nothing is sent: when it connects
(against the running brains of its task queue), and before an answer, a review or an
audit page (against the workflow it writes to). Only what a worker sealed tells its key:
the escalation memo, activity and local activity results, the workflow's result, a
continue-as-new input (not the start input nor a signal, which any client may have
sealed)."""

from __future__ import annotations

import asyncio

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError

import vicar.contracts as c
from vicar.errors import CodecKeyError
from vicar.runtime.codec import ENCODING, KEY_FILE_VAR, KEY_ID, KEYS_VAR, AesGcmCodec

# Newest events looked at for a worker-sealed payload: a brain's or a finished gate's
# last turn holds several; more would cost a listing of a long history for nothing.
LOOK_BACK = 50
# When connecting: this many running brains (the newest first) are looked at, within
# this long; a client that opens what any of them holds has a key of the workers'.
BRAINS, CHECK_SECONDS = 3, 5.0


async def check_keys(client: Client, task_queue: str) -> None:
    """CodecKeyError, one line, when this client opens none of what the workers sealed
    in the running brains of `task_queue` (the newest first). Nothing to look at (a new
    deployment), or Temporal slow to answer: no check, the workers still refuse."""
    codec = client.data_converter.payload_codec
    if not isinstance(codec, AesGcmCodec):
        return
    query = f'WorkflowType = "{c.BRAIN_WORKFLOW}" AND ExecutionStatus = "Running" AND TaskQueue = "{task_queue}"'
    lacked: list[str] = []
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            async for wf in client.list_workflows(query, limit=BRAINS, page_size=BRAINS):
                payload = await newest_worker_sealed(client, wf.id)
                if payload is None:
                    continue
                try:
                    codec.open(payload)
                    return
                except CodecKeyError:
                    lacked.append(payload.metadata.get(KEY_ID, b"").decode(errors="replace"))
    except (RPCError, TimeoutError):
        return
    if lacked:
        keys = ", ".join(repr(k) for k in dict.fromkeys(lacked))
        raise CodecKeyError(
            f"the workers seal with key {keys}, which this process lacks or holds under another value (it "
            f"has: {', '.join(codec.keys)}); give it the workers' keys ({KEYS_VAR} or {KEY_FILE_VAR}); "
            "nothing was sent"
        )


def check_opens(client: Client, payload: Payload | None, what: str) -> None:
    """CodecKeyError, one line, when `payload` (sealed by a worker) does not open here."""
    codec = client.data_converter.payload_codec
    if payload is None or not isinstance(codec, AesGcmCodec) or payload.metadata.get("encoding") != ENCODING:
        return
    try:
        codec.open(payload)
    except CodecKeyError:
        key_id = payload.metadata.get("encryption-key-id", b"").decode(errors="replace")
        how = "lacks" if key_id not in codec.keys else "holds under another value"
        raise CodecKeyError(
            f"{what} is sealed with key {key_id!r}, which this process {how} (it has: {', '.join(codec.keys)}): "
            f"a key the workers hold ({KEYS_VAR} or {KEY_FILE_VAR}), or one rotated out since (docs/codec.md); "
            "nothing was sent"
        ) from None


async def check_workflow_opens(client: Client, workflow_id: str, what: str) -> None:
    """check_opens on the newest payload a worker sealed in the workflow's history; no
    check when there is none (or the workflow is not there: the caller says so)."""
    if isinstance(client.data_converter.payload_codec, AesGcmCodec):
        check_opens(client, await newest_worker_sealed(client, workflow_id), what)


async def newest_worker_sealed(client: Client, workflow_id: str) -> Payload | None:
    try:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id),
                maximum_page_size=LOOK_BACK,
            )
        )
    except RPCError:
        return None
    return next((p for p in map(worker_sealed, page.history.events) if p is not None), None)


def worker_sealed(event: HistoryEvent) -> Payload | None:
    attrs = event.WhichOneof("attributes")
    candidates: list[Payload] = []
    if attrs == "activity_task_completed_event_attributes":
        candidates = list(event.activity_task_completed_event_attributes.result.payloads)
    elif attrs == "marker_recorded_event_attributes":
        details = event.marker_recorded_event_attributes.details
        candidates = [p for payloads in details.values() for p in payloads.payloads]
    elif attrs == "workflow_execution_completed_event_attributes":
        candidates = list(event.workflow_execution_completed_event_attributes.result.payloads)
    elif attrs == "workflow_execution_continued_as_new_event_attributes":
        candidates = list(event.workflow_execution_continued_as_new_event_attributes.input.payloads)
    elif attrs == "workflow_properties_modified_event_attributes":
        candidates = list(event.workflow_properties_modified_event_attributes.upserted_memo.fields.values())
    return next((p for p in candidates if p.metadata.get("encoding") == ENCODING), None)
