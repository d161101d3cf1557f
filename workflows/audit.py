"""The audit trail through Temporal (docs/audit.md): a client anywhere that reaches
Temporal reads a principal's gate records, or reviews an answer the proxy gave alone,
by starting one of these small workflows. Each finds where the principal's memory is
(LOCATE_MEMORY, on any worker) and runs one step there, on the memory's shard."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import GateDetails, GateStatus
    from vicar.models.audit import AuditPage, AuditPageRequest, MemoryPlace, ReviewRequest, ReviewResult
    from vicar.workflows.failures import cause_message
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.routing import run_memory_activity


async def _place(principal: str) -> MemoryPlace:
    return await workflow.execute_activity(c.LOCATE_MEMORY, principal, result_type=MemoryPlace, **c.READ_OPTIONS)


@workflow.defn(name=c.AUDIT_WORKFLOW)
class AuditWorkflow:
    """One page of a principal's audit trail (read-only)."""

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> AuditPage:
        req = one_input(args, AuditPageRequest, "audit page request")
        place = await _place(req.principal)
        return await run_memory_activity(
            c.AUDIT_PAGE, req, AuditPage, c.READ_OPTIONS, shard=place.shard, wait_seconds=place.wait_seconds
        )


@workflow.defn(name=c.REVIEW_WORKFLOW)
class ReviewWorkflow:
    """A review of an autonomous answer, recorded where the memory is; a `wrong` one is
    sent to the webhook as `overruled` so the orchestrator can undo what followed."""

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> ReviewResult:
        req = one_input(args, ReviewRequest, "review request")
        place = await _place(req.principal)
        result: ReviewResult = await run_memory_activity(
            c.RECORD_REVIEW, req, ReviewResult, c.READ_OPTIONS, shard=place.shard, wait_seconds=place.wait_seconds
        )
        if result.refusal or result.review is None or result.review.verdict != "wrong":
            return result
        # Sent again for a repeated review: the receiver sees one event id per gate.
        notice = c.Notice(
            event="overruled",
            event_id=f"{req.gate_workflow_id}/overruled",
            gate=GateDetails(
                gate_id=result.gate_id,
                principal=req.principal,
                state=result.state,
                task_type=result.task_type,
                status=GateStatus.done,
                question=result.question,
                workflow_id=req.gate_workflow_id,
                n=result.n,
                proxy_action=result.proxy_action,
                proxy_text=result.proxy_words,
            ),
            review=result.review,
        )
        try:
            told = await workflow.execute_activity(c.NOTIFY, notice, result_type=bool, **c.NOTIFY_OPTIONS)
        except ActivityError as exc:
            # The label is recorded either way; the client is told the webhook was not.
            workflow.logger.warning("review of %s: the webhook was not told: %s", req.gate_workflow_id, exc)
            return result.model_copy(update={"why": f"the webhook was not told: {cause_message(exc)}"})
        return result if told else result.model_copy(update={"why": "no webhook is configured (VICAR_WEBHOOK_URL)"})
