"""Before a client writes to a workflow: can it open what the workers sealed there? A
client with other keys than the workers' would have its answer, review or audit refused
by the worker (issue 34); it is refused here instead, in one line naming the workers'
key, and nothing is sent. Only what a worker sealed tells its key: the escalation memo,
activity and local activity results, the workflow's result, a continue-as-new input
(not the start input nor a signal, which any client may have sealed)."""

from __future__ import annotations

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError

from vicar.codec import ENCODING, KEY_FILE_VAR, KEYS_VAR, AesGcmCodec, CodecKeyError

# Newest events looked at for a worker-sealed payload: a brain's or a finished gate's
# last turn holds several; more would cost a listing of a long history for nothing.
LOOK_BACK = 50


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
            f"{what} is sealed with the workers' key {key_id!r}, which this process {how} (it has: "
            f"{', '.join(codec.keys)}); give it the workers' keys ({KEYS_VAR} or {KEY_FILE_VAR}); nothing was sent"
        ) from None


async def check_workflow_opens(client: Client, workflow_id: str, what: str) -> None:
    """check_opens on the newest payload a worker sealed in the workflow's history; no
    check when there is none (or the workflow is not there: the caller says so)."""
    if not isinstance(client.data_converter.payload_codec, AesGcmCodec):
        return
    try:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id),
                maximum_page_size=LOOK_BACK,
            )
        )
    except RPCError:
        return
    for event in page.history.events:
        payload = worker_sealed(event)
        if payload is not None:
            check_opens(client, payload, what)
            return


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
