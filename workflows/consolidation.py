"""Consolidation of one session's new memories, under the principal's brain turn: it
rewrites memory, so no gate of the principal may read or write meanwhile. The plan is an
activity result (recorded in history), so a worker killed mid-apply resumes the same plan;
the apply step skips decisions already logged, so each is applied once."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from vicar import contracts as c
    from vicar.models import ConsolidationInput, ConsolidationPlan, ConsolidationReport, TurnGrant, TurnRequest
    from workflows.routing import run_memory_activity

# Consolidation must finish: retried until it does (a failure shows in the Temporal UI).
FOREVER = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1))
QUICK = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=5)),
)


@workflow.defn(name=c.CONSOLIDATION_WORKFLOW)
class ConsolidationWorkflow:
    def __init__(self) -> None:
        self._grant: TurnGrant | None = None

    @workflow.signal
    def turn_granted(self, grant: TurnGrant) -> None:
        if self._grant is None:
            self._grant = grant

    @workflow.run
    async def run(self, inp: ConsolidationInput) -> ConsolidationReport:
        turn = c.TurnAsk(principal=inp.principal,
                         turn=TurnRequest(gate_id=f"consolidation/{inp.session_id}",
                                          workflow_id=workflow.info().workflow_id))
        wait = timedelta(seconds=1)
        while True:
            self._grant = None
            ticket = await workflow.execute_local_activity(c.REQUEST_TURN, turn, result_type=c.TurnTicket, **QUICK)
            turn.attempt += 1  # a new update id for the next ask (the brain deduplicates ids)
            refused, shard = ticket.error, ticket.shard
            if refused is None and ticket.n is None:
                await workflow.wait_condition(lambda: self._grant is not None)
                refused = self._grant.error if self._grant else None
                shard = self._grant.shard if self._grant else None
            if refused is None:
                break
            # The brain refused the turn (the principal's memory is unavailable): the plan
            # waits until the memory is repaired.
            workflow.logger.warning("consolidation of %s waits for the memory: %s", inp.session_id, refused)
            await workflow.sleep(wait)
            wait = min(wait * 2, timedelta(seconds=30))
        try:
            # On the memory's shard, waiting for its owner however long: nothing is lost.
            plan = await run_memory_activity(
                c.PLAN_CONSOLIDATION, inp, ConsolidationPlan,
                dict(start_to_close_timeout=timedelta(minutes=10), retry_policy=FOREVER), shard=shard)
            return await run_memory_activity(
                c.APPLY_CONSOLIDATION, c.ApplyInput(principal=inp.principal, plan=plan), ConsolidationReport,
                dict(start_to_close_timeout=timedelta(hours=1), heartbeat_timeout=timedelta(seconds=inp.heartbeat_seconds),
                     retry_policy=FOREVER), shard=shard)
        finally:
            await workflow.execute_local_activity(c.RELEASE_TURN, turn, **QUICK)
