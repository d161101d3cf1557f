"""The gate's `autonomy_withdrawn` notice: its consult found the context's autonomy
withdrawn and this gate the first to see it (vicar.proxy.withdrawal_news)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import GateDetails, GateRequest
    from vicar.workflows.failures import cause_message


async def announce_withdrawal(req: GateRequest, shown: GateDetails, reason: str, options: dict[str, Any]) -> None:
    """Tell the webhook; sent outside the turn, and a receiver that stays down is logged
    (the withdrawal itself holds whatever the webhook does)."""
    event = "autonomy_withdrawn"
    notice = c.Notice(
        event=event,
        event_id=f"{workflow.info().workflow_id}/{event}",
        gate=shown,
        withdrawn=c.AutonomyWithdrawn(state=req.state.value, task_type=req.task_type, reason=reason),
    )
    try:
        await workflow.execute_activity(c.NOTIFY, notice, result_type=bool, **options)
    except ActivityError as exc:
        workflow.logger.warning("gate %s: the webhook was not told (%s): %s", req.gate_id, event, cause_message(exc))
