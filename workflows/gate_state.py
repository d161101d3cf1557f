"""What the gate's mixins (gate_consult, gate_record, gate_answers) share with
GateWorkflow: its state, declared here for the type checker (GateWorkflow.__init__ sets
it), and the memory step they all run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from vicar.models import Action, DialogTurn, GateDetails, HumanAnswer, ModelPin, Usage

from vicar.workflows.turn import TurnHolder


class GateState(TurnHolder):
    _answer: HumanAnswer | None
    _details: GateDetails | None
    _local_steps: bool
    _max_dialog_turns: int
    _dialog: list[DialogTurn]
    _usage: Usage
    _valid_actions: tuple[Action, ...]
    _working_memory: str
    _in_session: bool
    _vetting: bool
    _once: bool
    _identity: str | None
    _pin: ModelPin | None
    _shard: int | None
    _shard_wait: float
    _escalated_at: Any
    _release_by_signal: bool
    _turn_owed: bool
    _default_deadline: float
    _deadline_at: datetime | None

    async def _step(
        self,
        name: str,
        arg: Any,
        result_type: Any,
        options: dict[str, Any] = {},  # noqa: B006  (never called: GateWorkflow's runs)
        local: bool | None = None,
    ) -> Any:
        raise NotImplementedError  # GateWorkflow._step

    def _check(self, answer: HumanAnswer) -> None:
        raise NotImplementedError  # GateWorkflow._check
