"""One gate, everything about it, for a person: `gate_view(client, id) -> GateView`
(used by `vicar gate show`, `GateHandle.view()` and the web inbox's gate page).

Waiting or finished, with or without a worker: the request comes from the gate's first
history event, a finished gate's result from its last, the live details from the gate's
query when a worker answers it and else from the memo the gate wrote when it escalated.
The artifact files' excerpts are the ones the gate's worker read (the reviewer's machine
may not reach those files); the inline artifact is cut at VIEW_ARTIFACT_CHARS with the
files sharing what is left."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from vicar import contracts as c
from vicar.client.gates import find_gate, started_with
from vicar.models import GateDetails, GateRequest, GateResult
from vicar.models.view import VIEW_ARTIFACT_CHARS, ArtifactFile, GateView
from vicar.proxy.reasons import ReasonFacts, reason_words

# A query waits for a worker to run it: a gate whose worker is down is shown from its
# memo after this long rather than hanging the command or the page.
QUERY_SECONDS = 5.0
DATE_SECONDS = 2.0  # each evidence date is looked up this long at most: a page does not wait on it


async def _query(handle: WorkflowHandle, name: str, result_type: type, seconds: float) -> tuple[object | None, str]:
    """The query's answer, or None and why there is none."""
    try:
        return await handle.query(name, result_type=result_type, rpc_timeout=timedelta(seconds=seconds)), ""
    except RPCError as exc:
        return None, f"no worker answered ({exc.status.name.lower() if exc.status else 'error'})"
    except Exception as exc:  # noqa: BLE001  (WorkflowQueryFailedError and the like: shown, not raised)
        return None, f"the gate could not answer ({type(exc).__name__})"


async def _dates(client: Client, gate_ids: list[str]) -> dict[str, datetime]:
    """When each earlier gate closed (its answer), for those Temporal still keeps."""

    async def closed(gate_id: str) -> datetime | None:
        handle = client.get_workflow_handle(c.gate_workflow_id(gate_id))
        try:
            return (await asyncio.wait_for(handle.describe(), DATE_SECONDS)).close_time
        except (RPCError, TimeoutError):
            return None  # past the namespace's retention, started under another id, or slow: undated

    found = await asyncio.gather(*(closed(g) for g in gate_ids))
    return {g: d for g, d in zip(gate_ids, found) if d is not None}


def _files(files: list[ArtifactFile], budget: int) -> list[ArtifactFile]:
    """The files' excerpts within what the inline text left of the view's bound."""
    out = []
    for f in files:
        cut = f.excerpt[: max(budget, 0)]
        budget -= len(cut)
        out.append(f.model_copy(update={"excerpt": cut, "truncated": f.truncated or len(cut) < len(f.excerpt)}))
    return out


async def gate_view(client: Client, gate_id_or_workflow_id: str, query_seconds: float = QUERY_SECONDS) -> GateView:
    """Everything one gate shows; NotFound (vicar.errors) if there is no such gate. A
    worker that does not answer the gate's queries within `query_seconds` is skipped."""
    handle, desc = await find_gate(client, gate_id_or_workflow_id)
    running = desc.status == WorkflowExecutionStatus.RUNNING
    request_task = asyncio.ensure_future(started_with(handle))
    (details, why_details), (files, why_files) = await asyncio.gather(
        _query(handle, c.DETAILS_QUERY, GateDetails, query_seconds),
        _query(handle, c.ARTIFACT_QUERY, list[ArtifactFile], query_seconds),
    )
    req: GateRequest | None = await request_task
    details_from = "query" if details is not None else ""
    if details is None:
        memo = await desc.memo_value(c.ESCALATION_MEMO, None)
        if memo is not None:
            details, details_from = GateDetails.model_validate(memo), "memo"
    assert details is None or isinstance(details, GateDetails)
    result: GateResult | None = None
    ended = ""
    if not running:
        try:
            result = await client.get_workflow_handle(handle.id, result_type=GateResult).result()
        except WorkflowFailureError as exc:
            ended = getattr(exc.cause, "message", None) or str(exc.cause or exc)
    status_name = desc.status.name.lower() if desc.status is not None else "unknown"
    gate_status = details.status.value if details is not None else ("done" if result else status_name)

    text = req.artifact_text if req else ""
    shown_text = text[:VIEW_ARTIFACT_CHARS]
    kept = list(files) if isinstance(files, list) else []
    files_note = ""
    if req and req.artifact_paths and not kept:
        files_note = (
            f"the files' excerpts are kept by the gate's worker: {why_files}"
            if why_files
            else "the gate kept no excerpts (it was not escalated, or it escalated before excerpts were kept)"
        )
    deadline = details.deadline if details is not None else None
    if deadline is None and req and req.deadline_seconds and desc.start_time:
        deadline = desc.start_time + timedelta(seconds=req.deadline_seconds)
    src = details or result
    prereview = details.prereview if details and details.prereview else (result.prereview if result else [])
    dates = await _dates(client, list(dict.fromkeys(i.gate_id for i in prereview if i.gate_id)))
    view = GateView(
        gate_id=req.gate_id if req else (src.gate_id if src else gate_id_or_workflow_id),
        workflow_id=handle.id,
        workflow_status=status_name,
        status=gate_status,
        kind=req.kind.value if req else "gate",
        principal=req.principal if req else (src.principal if src else "?"),
        state=req.state.value if req else (src.state.value if src else "?"),
        task_type=req.task_type if req else (src.task_type if src else "?"),
        question=req.question if req else (details.question if details else ""),
        escalation_mode=req.escalation_mode.value if req else "",
        actor_message=req.actor_message if req else "",
        upstream_agent=req.upstream_agent if req else (details.upstream_agent if details else None),
        title=req.title if req else "",
        lineage=req.lineage if req else None,
        revision=req.revision if req else None,
        session_id=req.session_id if req else None,
        artifact_text=shown_text,
        artifact_text_chars=len(text),
        artifact_truncated=len(shown_text) < len(text),
        artifact_files=_files(kept, VIEW_ARTIFACT_CHARS - len(shown_text)),
        artifact_files_note=files_note,
        started_at=desc.start_time,
        escalated_at=details.escalated_at if details else None,
        deadline=deadline,
        closed_at=desc.close_time,
        n=details.n if details and details.n is not None else (result.n if result else None),
        proxy_action=_value(details.proxy_action if details else (result.proxy_action if result else None)),
        proxy_text=details.proxy_text if details else (result.text if result and not result.escalated else ""),
        proxy_confidence=details.proxy_confidence if details else (result.confidence if result else None),
        autonomy_threshold=details.autonomy_threshold if details else None,
        proxy_supported=details.proxy_supported if details else None,
        proxy_support_label=details.proxy_support_label if details else "",
        calibration_guard=details.calibration_guard if details else (result.calibration_guard if result else ""),
        calibration_note=details.calibration_note if details else (result.calibration_note if result else ""),
        prereview=prereview,
        prereview_dates=dates,
        lineage_verdicts=details.lineage_verdicts if details else [],
        unsupported=(
            details.unsupported if details and details.unsupported else (result.unsupported if result else [])
        ),
        dialog=details.dialog if details else (result.dialog if result else []),
        result=result,
        ended=ended,
        details_from=details_from or ("none" + (f": {why_details}" if why_details else "")),
    )
    view.reason_words = reason_words(view_facts(view, details))
    return view


def view_facts(v: GateView, details: GateDetails | None) -> ReasonFacts:
    """What the reason is made of, from the gate's view: whether it went to the person
    (its result, else its status), and the threshold it had to reach on the scale of
    the confidence shown (the gate's details carry it; a finished gate's result has it
    on the raw score only, which is not put beside a shown confidence)."""
    r = v.result
    escalated = r.escalated if r is not None else (True if v.status == "escalated" or v.escalated_at else None)
    return ReasonFacts(
        guard=v.calibration_guard,
        note=v.calibration_note,
        escalated=escalated,
        escalation_mode=v.escalation_mode,
        answered_by=r.answered_by.value if r is not None else "",
        confidence=v.proxy_confidence,
        threshold=details.autonomy_threshold if details is not None else None,
        target=details.autonomy_target if details is not None else None,
        task_type=v.task_type,
    )


def _value(action: object) -> str | None:
    return getattr(action, "value", None) if action is not None else None
