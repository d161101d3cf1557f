"""A gate id is single-use per principal (contracts.GATE_ONCE).

Temporal lets a client start a finished workflow id again (the default id-reuse policy
allows it), which opened a second run that asked the human again, returned that answer
to the orchestrator, and never stored it (the outcome log keeps one record per workflow
id). The second run now finds the first run's record under the turn and returns it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import AnsweredBy, GateRequest, GateResult, OutcomeRecord
    from vicar.workflows.routing import run_memory_activity

LOOKUP = dict(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=5
    ),
)
ALREADY = "this gate id's outcome was recorded by an earlier run; nobody was asked again"


async def recorded(req: GateRequest, shard: int | None, wait_seconds: float) -> OutcomeRecord | None:
    return await run_memory_activity(
        c.RECORDED_OUTCOME,
        c.OutcomeLookup(principal=req.principal, workflow_id=workflow.info().workflow_id),
        OutcomeRecord | None,
        LOOKUP,
        shard=shard,
        wait_seconds=wait_seconds,
        local=True,
    )


def result_from_record(req: GateRequest, rec: OutcomeRecord) -> GateResult:
    cal = rec.calibration
    return GateResult(
        gate_id=req.gate_id,
        principal=req.principal,
        state=rec.request.state,
        task_type=rec.request.task_type,
        action=rec.action,
        text=rec.response_text,
        confidence=cal.confidence if cal else 0.0,
        prior_confidence=rec.prior.confidence if rec.prior else 0.0,
        calibration_guard=cal.guard if cal else "",
        calibration_note=ALREADY,
        escalated=rec.answered_by is AnsweredBy.human,
        answered_by=rec.answered_by,
        responder=rec.responder,
        responder_identity=rec.responder_identity,
        n=rec.n,
        surprise=rec.surprise,
        dialog=list(rec.dialog),
        autonomy_threshold=cal.threshold if cal else None,
        autonomy_bound=cal.bound if cal else None,
        autonomy_evidence=cal.evidence if cal else 0,
        prereview=list(rec.posterior.prereview) if rec.posterior else [],
        unsupported=list(rec.posterior.unsupported) if rec.posterior else [],
    )
