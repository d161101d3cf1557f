"""What a gate shows about itself: its details when it starts, the clipped copy the memo
and the webhook carry, the text the Temporal UI shows while it waits, and the excerpts
of its artifact files (issue 28: a person must see what they approve)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import Calibration, GateDetails, GateRequest, GateStatus, PassResult, RequestKind
    from vicar.models.view import ArtifactFile, ExcerptInput, excerpt_line
    from vicar.workflows.failures import cause_message

# Each text an escalated gate shows in its memo (visibility listings carry it).
MEMO_TEXT_CHARS = 1000
# Pre-review items the memo, the webhook and the UI carry (the query has them all).
SHOWN_PREREVIEW = 4
# Reading a few excerpts is quick; a worker that cannot does not hold the escalation up.
EXCERPTS: dict = dict(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(maximum_attempts=2),
)


def initial_details(req: GateRequest, workflow_id: str) -> GateDetails:
    return GateDetails(
        gate_id=req.gate_id,
        principal=req.principal,
        state=req.state,
        task_type=req.task_type,
        status=GateStatus.queued,
        question=req.question,
        workflow_id=workflow_id,
        artifact_excerpt=excerpt_line(req.artifact_text),
        upstream_agent=req.upstream_agent,
    )


def shown(d: GateDetails) -> GateDetails:
    """The gate's details with each text clipped, for the memo and the webhook."""
    clip = MEMO_TEXT_CHARS
    return d.model_copy(
        update={
            "question": d.question[:clip],
            "proxy_text": d.proxy_text[:clip],
            "calibration_note": d.calibration_note[:clip],
            "dialog": [t.model_copy(update={"text": t.text[:clip]}) for t in d.dialog],
            "prereview": [
                i.model_copy(update={"text": i.text[:clip], "features": {}}) for i in d.prereview[:SHOWN_PREREVIEW]
            ],
            "unsupported": [u[:clip] for u in d.unsupported[:SHOWN_PREREVIEW]],
        }
    )


async def read_excerpts(req: GateRequest, d: GateDetails) -> list[ArtifactFile]:
    """The worker's excerpts of the artifact files, for a person who cannot read them;
    the details' one-line excerpt comes from the first file when there is no inline text."""
    if not req.artifact_paths or not workflow.patched(c.GATE_EXCERPTS):
        return []
    try:
        files = await workflow.execute_local_activity(
            c.ARTIFACT_EXCERPTS, ExcerptInput(paths=req.artifact_paths), result_type=list[ArtifactFile], **EXCERPTS
        )
    except ActivityError as exc:
        why = f"the worker could not read it: {cause_message(exc)}"
        return [ArtifactFile(path=p, error=why) for p in req.artifact_paths]
    if not d.artifact_excerpt:
        d.artifact_excerpt = next((excerpt_line(f.excerpt) for f in files if f.excerpt), "")
    return files


def ui_details(req: GateRequest, d: GateDetails, posterior: PassResult, calibration: Calibration) -> str:
    """The Temporal UI's text while the gate waits: what is asked, about what, the
    proxy's words and the person's own past words behind them."""
    lines = [
        f"**Waiting for {req.principal}** — {req.state.value} / {req.task_type}",
        f"**Question:** {req.question}",
    ]
    if d.artifact_excerpt:
        lines.append(f"**Artifact:** {d.artifact_excerpt}")
    if req.upstream_agent:
        lines.append(f"**From agent:** {req.upstream_agent}")
    if d.deadline is not None:
        lines.append(f"**Deadline:** {d.deadline.isoformat()}")
    lines.append(
        f"**Proxy's guess** ({posterior.action.value if posterior.action else 'no prediction'}, "
        f"confidence {calibration.confidence:.2f}, guard {calibration.guard}): {posterior.prose or posterior.note}"
    )
    if calibration.note:
        lines.append(f"**Why:** {calibration.note}")
    if d.prereview:
        lines.append(
            "**Their own past words:**\n"
            + "\n".join(f"- {i.text[:300]} ({i.action}, gate {i.gate_id or i.chunk_id})" for i in d.prereview[:3])
        )
    if d.unsupported:
        lines.append("**Unsupported by their words:** " + "; ".join(u[:200] for u in d.unsupported[:3]))
    verb = "answer" if req.kind is RequestKind.question else "ACTION"
    lines.append(
        f'Answer with `vicar answer {req.gate_id} {verb} "text"`, or see it all: `vicar gate show {req.gate_id}`.'
    )
    return "\n\n".join(lines)
