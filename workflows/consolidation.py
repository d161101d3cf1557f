"""Consolidation of one session's new memories, under the principal's brain turn: it
rewrites memory, so no gate of the principal may read or write meanwhile. The plan is an
activity result (recorded in history), so a worker killed mid-apply resumes the same plan;
the apply step skips decisions already logged, so each is applied once."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.memory.consolidation_plan import ConsolidationPlan, ConsolidationReport
    from vicar.memory.names import check_principal
    from vicar.models import ConsolidationInput, TurnRequest
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.turn import Turn


def _check(inp: ConsolidationInput) -> None:
    check_principal(inp.principal)
    wid = workflow.info().workflow_id
    if wid != c.consolidation_workflow_id(inp.principal, inp.session_id):
        raise ValueError(f"consolidation {inp.principal}/{inp.session_id} does not own workflow id {wid!r}")
    if not inp.heartbeat_seconds > 0:
        raise ValueError("heartbeat_seconds must be positive")


@workflow.defn(name=c.CONSOLIDATION_WORKFLOW)
class ConsolidationWorkflow:
    def __init__(self) -> None:
        self.turn = Turn()

    @workflow.signal(name=c.TURN_GRANTED_SIGNAL)
    @raw_argument
    def turn_granted(self, *args: RawValue) -> None:
        self.turn.granted(args)

    @workflow.signal(name=c.TURN_WANTED_SIGNAL)
    @raw_argument
    def turn_wanted(self, *args: RawValue) -> None:
        self.turn.want(args)

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> ConsolidationReport:
        inp = one_input(args, ConsolidationInput, "consolidation input", _check)
        ask = c.TurnAsk(
            principal=inp.principal,
            turn=TurnRequest(gate_id=f"consolidation/{inp.session_id}", workflow_id=workflow.info().workflow_id),
        )
        shard = await self.turn.take(ask, f"consolidation of {inp.session_id}")
        try:
            # On the memory's shard, waiting for its owner however long: nothing is lost.
            plan = await run_memory_activity(c.PLAN_CONSOLIDATION, inp, ConsolidationPlan, c.PLAN_OPTIONS, shard=shard)
            return await run_memory_activity(
                c.APPLY_CONSOLIDATION,
                c.ApplyInput(principal=inp.principal, plan=plan),
                ConsolidationReport,
                c.apply_options(inp.heartbeat_seconds),
                shard=shard,
            )
        finally:
            await self.turn.release(ask)
