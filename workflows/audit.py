"""The audit trail through Temporal (docs/audit.md): a client anywhere that reaches
Temporal reads a principal's gate records, or reviews an answer the proxy gave alone,
by starting one of these small workflows. Each finds where the principal's memory is
(LOCATE_MEMORY, on any worker) and runs one step there, on the memory's shard."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import GateDetails, GateStatus
    from vicar.models.audit import AuditPage, AuditPageRequest, MemoryPlace, ReviewRequest, ReviewResult
    from vicar.workflows.failures import cause_message
    from vicar.workflows.inputs import one_input, raw_input
    from vicar.workflows.routing import run_memory_activity

# A reader waits for its page: a few quick retries, then the client hears why.
READ: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=5
    ),
)
# Telling the orchestrator of an overruled answer: as the gate's own notices.
NOTIFY: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=8
    ),
)


async def _place(principal: str) -> MemoryPlace:
    return await workflow.execute_activity(c.LOCATE_MEMORY, principal, result_type=MemoryPlace, **READ)


@raw_input
@workflow.defn(name=c.AUDIT_WORKFLOW)
class AuditWorkflow:
    """One page of a principal's audit trail (read-only)."""

    @workflow.run
    async def run(self, *args) -> AuditPage:
        req = one_input(args, AuditPageRequest, "audit page request")
        place = await _place(req.principal)
        return await run_memory_activity(
            c.AUDIT_PAGE, req, AuditPage, READ, shard=place.shard, wait_seconds=place.wait_seconds
        )


@raw_input
@workflow.defn(name=c.REVIEW_WORKFLOW)
class ReviewWorkflow:
    """A review of an autonomous answer, recorded where the memory is; a `wrong` one is
    sent to the webhook as `overruled` so the orchestrator can undo what followed."""

    @workflow.run
    async def run(self, *args) -> ReviewResult:
        req = one_input(args, ReviewRequest, "review request")
        place = await _place(req.principal)
        result: ReviewResult = await run_memory_activity(
            c.RECORD_REVIEW, req, ReviewResult, READ, shard=place.shard, wait_seconds=place.wait_seconds
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
            told = await workflow.execute_activity(c.NOTIFY, notice, result_type=bool, **NOTIFY)
        except ActivityError as exc:
            # The label is recorded either way; the client is told the webhook was not.
            workflow.logger.warning("review of %s: the webhook was not told: %s", req.gate_workflow_id, exc)
            return result.model_copy(update={"why": f"the webhook was not told: {cause_message(exc)}"})
        return result if told else result.model_copy(update={"why": "no webhook is configured (VICAR_WEBHOOK_URL)"})
