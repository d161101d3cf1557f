"""Starts of a workflow type Vicar does not have, on Vicar's task queue (anyone who may
start a workflow in the namespace can send one, without the payload key). At one of
Vicar's own ids (`vicar-brain/<principal>`, `vicar-gate/<id>`, …) such a run would hold
the id for ever: its workflow task fails on every worker, so a squatted brain id turned
the proxy off for its principal until an operator terminated it. The worker refuses it
instead, in its first task, with one non-retryable line: the id is free again for the
next gate's brain. At any other id the run is left as the SDK leaves a type it does not
know (its task fails, to be retried by a worker that has the type: a newer Vicar, or
another deployment's worker). `vicar health` names what holds an id elsewhere (another
task queue), and how to free it (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.errors import INVALID_WORKFLOW_INPUT

# The ids Vicar's workflows run at, by their prefix.
ID_PREFIXES = (
    c.brain_workflow_id(""),
    c.gate_workflow_id(""),
    c.session_workflow_id("", "").rstrip("/") + "/",
    c.consolidation_workflow_id("", "").rstrip("/") + "/",
    c.move_workflow_id(""),
    c.audit_workflow_id("", "").rstrip("/") + "/",
    c.review_workflow_id(""),
)


@workflow.defn(dynamic=True)
class ForeignWorkflow:
    """Any workflow type this worker has no definition for."""

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> None:
        info = workflow.info()
        if info.workflow_id.startswith(ID_PREFIXES):
            raise ApplicationError(
                f"refused: {info.workflow_type[:100]!r} is not a Vicar workflow, and {info.workflow_id[:300]} is "
                "one of Vicar's ids (started without Vicar's client? docs/operations.md)",
                type=INVALID_WORKFLOW_INPUT,
                non_retryable=True,
            )
        # As for any type a worker does not have: the task fails, and is tried again.
        raise RuntimeError(f"workflow type {info.workflow_type[:100]!r} is not registered on this worker")
