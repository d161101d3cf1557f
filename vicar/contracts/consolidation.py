"""The consolidation's contract (workflows/consolidation.py): one session's new
memories rewritten under the principal's turn, planned then applied."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.common import RetryPolicy

from vicar.contracts.brain import HOLDER_SIGNALS
from vicar.contracts.handles import Handles
from vicar.memory.consolidation_plan import ConsolidationPlan

CONSOLIDATION_WORKFLOW = "VicarConsolidation"
CONSOLIDATION_HANDLES = Handles(CONSOLIDATION_WORKFLOW, signals=HOLDER_SIGNALS)


def consolidation_workflow_id(principal: str, session_id: str) -> str:
    return f"vicar-consolidation/{principal}/{session_id}"


# Activities, on the memory's shard: ConsolidationInput -> ConsolidationPlan, then
# ApplyInput -> ConsolidationReport.
PLAN_CONSOLIDATION = "plan_consolidation"
APPLY_CONSOLIDATION = "apply_consolidation"
CONSOLIDATION_ACTIVITIES = (PLAN_CONSOLIDATION, APPLY_CONSOLIDATION)

# Consolidation must finish: retried until it does (a failure shows in the Temporal UI).
_FOREVER = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1))
PLAN_OPTIONS: dict[str, Any] = dict(start_to_close_timeout=timedelta(minutes=10), retry_policy=_FOREVER)


def apply_options(heartbeat_seconds: float) -> dict[str, Any]:
    """Applying heartbeats: a worker killed mid-apply is noticed after the input's interval."""
    return dict(
        start_to_close_timeout=timedelta(hours=1),
        heartbeat_timeout=timedelta(seconds=heartbeat_seconds),
        retry_policy=_FOREVER,
    )


class ApplyInput(BaseModel):
    principal: str
    plan: ConsolidationPlan
