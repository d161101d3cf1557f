"""The baselines: workflows that do nothing but Temporal work, so their round trip is
Temporal's floor for an empty workflow, for the gate's shape, or for the gate's shape
with the brain's turn protocol.

- `BenchFloor`: an empty workflow that optionally runs N no-op local activities;
- `BenchFloorBrain` + `BenchFloorGate`: the real gate's structure (workflows/gate.py,
  workflows/brain.py, activities/proxy.py) with no proxy work. The floor gate takes a
  turn with a local activity that does update-with-start `take_turn` on its principal's
  floor brain (which runs one no-op local activity, like `advance_turn`, that checks the
  last holder's record and mirrors the counter, and grants at once), then runs 2 no-op
  local activities (consult, record). Like a real gate that decides alone, it gives the
  turn back by its record: no release signal. So, per gate: 3 local activities on the
  gate, 1 workflow task on the brain (the update), 1 client call from inside an activity.
  The full-structure variant (`FloorGateInput(steps=3, done_status=True)`, started with
  the gate's four search attributes) adds what else a real gate that decided alone
  carries: the pin step (PIN_MODEL, a local activity of its own so a retried consult
  keeps the pinned model) and the `VicarStatus = done` upsert.

Not modelled: the real brain's queue, `turn_granted` and `turn_wanted` signals (unused
when each principal runs its gates one at a time, as the bench's streams do), and its
`read_counter` at the start of a run (once per brain run).

A module of its own because the workflow sandbox re-imports a workflow's module on
every run: the benchmark script's imports (rich, the worker) would inflate the floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

with workflow.unsafe.imports_passed_through():
    import vicar.workflows.search_attributes as sa
    from vicar.models import GateStatus

LOCAL_TIMEOUT = timedelta(seconds=30)
# Continue-as-new after this many grants, like the real brain (BrainConfig.max_grants_per_run).
MAX_GRANTS_PER_RUN = 500


@activity.defn(name="bench_noop")
def noop(payload: str) -> str:
    return payload


@workflow.defn(name="BenchFloor")
class FloorWorkflow:
    @workflow.run
    async def run(self, local_activities: int) -> None:
        for _ in range(local_activities):
            await workflow.execute_local_activity(noop, "x", start_to_close_timeout=LOCAL_TIMEOUT)


@dataclass
class FloorTurn:
    brain_id: str  # the principal's floor brain
    gate_id: str  # the asking gate's workflow id


@workflow.defn(name="BenchFloorBrain")
class FloorBrainWorkflow:
    """One per principal: hands out turns, at once (no queue), after one no-op local
    activity in the update, as the real brain checks the last holder's record and
    mirrors its counter before granting."""

    def __init__(self) -> None:
        self._counter = 0
        self._holder: str | None = None
        self._grants = 0

    @workflow.update
    async def take_turn(self, gate_id: str) -> int:
        n = self._counter + 1
        await workflow.execute_local_activity(noop, "advance", start_to_close_timeout=LOCAL_TIMEOUT)
        self._counter, self._holder = n, gate_id
        self._grants += 1
        return n

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(
            lambda: self._grants >= MAX_GRANTS_PER_RUN or workflow.info().is_continue_as_new_suggested()
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new()


class FloorBrainActivities:
    """The floor gate's request_turn: a client call, like activities/proxy.py."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def all(self) -> list:
        return [self.take_turn]

    @activity.defn(name="bench_take_turn")
    async def take_turn(self, turn: FloorTurn) -> int:
        return await self.client.execute_update_with_start_workflow(
            FloorBrainWorkflow.take_turn,
            turn.gate_id,
            start_workflow_operation=WithStartWorkflowOperation(
                FloorBrainWorkflow.run,
                id=turn.brain_id,
                task_queue=activity.info().task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
            id=f"turn/{turn.gate_id}",
        )


@dataclass
class FloorGateInput:
    brain_id: str
    steps: int = 2  # no-op local activities after the turn: consult and record (3: pin first)
    done_status: bool = False  # upsert VicarStatus = done at the end, as a real gate does


@workflow.defn(name="BenchFloorGate")
class FloorGateWorkflow:
    @workflow.run
    async def run(self, inp: FloorGateInput) -> int:
        turn = FloorTurn(brain_id=inp.brain_id, gate_id=workflow.info().workflow_id)
        n = await workflow.execute_local_activity(
            "bench_take_turn", turn, result_type=int, start_to_close_timeout=LOCAL_TIMEOUT
        )
        for _ in range(inp.steps):  # the last one is the record, which gives the turn back
            await workflow.execute_local_activity(noop, "step", start_to_close_timeout=LOCAL_TIMEOUT)
        if inp.done_status:
            workflow.upsert_search_attributes([sa.STATUS.value_set(GateStatus.done.value)])
        return n
