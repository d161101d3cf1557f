"""Vicar's client API for orchestrators: open a gate, await its result, answer it, list
the gates waiting for a human. Every call takes a connected `temporalio.client.Client`
(use `vicar.runtime.connect.connect(Settings.from_env())` for Vicar's configured server, or
your own client with `vicar.runtime.codec.data_converter(settings)`: pydantic, payloads sealed
with the worker's keys, docs/codec.md).

    handle = await open_gate(client, GateRequest(principal="alice", gate_id="deploy-42",
                                                 state="PLAN_ASSERT", task_type="db-migration",
                                                 question="Approve the migration plan?"))
    result = await handle.result(timeout=600)   # TimeoutError if it is still waiting
    if result.escalated: ...                    # the human answered; else the proxy did

The human stays in charge (docs/rules.md): `add_rule`, `remove_rule`, `get_control`,
`pause` and `resume` change a principal's rules and off switch in their brain, from
any machine that reaches Temporal; the next gate obeys them.

Errors are `vicar.errors` types: `Conflict` (the gate id exists with another request,
or the gate is not waiting for an answer), `NotFound`, `InvalidInput` (a bad field, one
line naming it), `NotResponding`. Requests and answers may be plain dicts (the JSON of
`vicar schema`); the models given are validated again, so one built with
`model_construct` or changed after it was built is refused here, not by the gate. (Building
a model yourself, `GateRequest(...)`, raises pydantic's ValidationError in your code.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from vicar import contracts as c
from vicar.client.gates import answer_gate, find_gate, list_escalations, query_details, start_gate, started_with
from vicar.client.view import gate_view
from vicar.errors import Conflict, InvalidInput, NotResponding, validation_summary
from vicar.models import BrainInput, GateDetails, GateRequest, GateResult, HumanAnswer, check_principal
from vicar.models.brain import BrainConfig
from vicar.models.control import Control, ControlChange, Rule
from vicar.models.view import GateView
from vicar.runtime.tasks import looked_at, wait_for
from vicar.settings import ANSWER_TIMEOUT, TASK_QUEUE

__all__ = [
    "GateHandle",
    "open_gate",
    "get_gate",
    "answer",
    "list_escalations",
    "GateRequest",
    "GateResult",
    "GateDetails",
    "GateView",
    "gate_view",
    "HumanAnswer",
    "Rule",
    "Control",
    "add_rule",
    "remove_rule",
    "get_control",
    "pause",
    "resume",
]

M = TypeVar("M", bound=BaseModel)


def _valid(model: type[M], value: M | Mapping[str, Any]) -> M:
    """`value` as a validated `model`, or InvalidInput in the CLI's one-line form."""
    try:
        data = value.model_dump(mode="json", round_trip=True) if isinstance(value, BaseModel) else value
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"invalid {model.__name__}: {validation_summary(exc)}") from None


@dataclass(frozen=True)
class GateHandle:
    """One gate: its id, the workflow id it runs under, and what can be done with it."""

    gate_id: str
    workflow_id: str
    client: Client

    def _workflow(self) -> WorkflowHandle:
        return self.client.get_workflow_handle(self.workflow_id, result_type=GateResult)

    async def result(self, timeout: float | None = None) -> GateResult:
        """The gate's result once it has one; with `timeout` (seconds), TimeoutError
        if it has none by then (the gate goes on)."""
        return await asyncio.wait_for(self._workflow().result(), timeout)

    async def details(self) -> GateDetails | None:
        """What the gate shows now: its status, the proxy's guess, the dialog."""
        return await query_details(self._workflow(), self.gate_id)  # the handle knows its workflow: no lookup

    async def view(self) -> GateView:
        """Everything about the gate, waiting or finished (what `vicar gate show` prints)."""
        return await gate_view(self.client, self.workflow_id)

    async def answer(self, action: str, text: str = "", *, responder: str, timeout: float = ANSWER_TIMEOUT) -> str:
        """Answer the gate as the human (it must be escalated); the gate's reply."""
        return await answer(self.client, self.workflow_id, dict(action=action, text=text, responder=responder), timeout)


async def open_gate(
    client: Client, request: GateRequest | Mapping[str, Any], task_queue: str = TASK_QUEUE
) -> GateHandle:
    """Open a gate, or attach to it: the same request sent again returns the existing
    gate's handle (running or finished); another request under its gate id is a Conflict."""
    request = _valid(GateRequest, request)
    handle = await start_gate(client, request, task_queue)
    return GateHandle(gate_id=request.gate_id, workflow_id=handle.id, client=client)


async def get_gate(client: Client, gate_id: str) -> GateHandle:
    """An existing gate, by its gate id or the workflow id it was started under."""
    handle, _ = await find_gate(client, gate_id)
    request = await started_with(handle)  # from history: no worker needed
    return GateHandle(gate_id=request.gate_id if request else gate_id, workflow_id=handle.id, client=client)


async def answer(
    client: Client, gate_id: str, answer: HumanAnswer | Mapping[str, Any], timeout: float = ANSWER_TIMEOUT
) -> str:
    """Answer an escalated gate (by gate id or workflow id); the gate's reply. An error
    names why not."""
    return await answer_gate(client, gate_id, _valid(HumanAnswer, answer), timeout)


# -- the human's rules and pauses (docs/rules.md) ---------------------------------------


async def change_control(
    client: Client,
    principal: str,
    change: ControlChange | Mapping[str, Any],
    *,
    task_queue: str = TASK_QUEUE,
    config: BrainConfig | None = None,
    timeout: float = ANSWER_TIMEOUT,
) -> Control:
    """Send one change to the principal's brain (starting it, with `config`, if no gate
    has yet: pass the deployment's shard count there) and return the rules and pauses
    now in force. A change the brain refuses is a Conflict, a malformed one InvalidInput;
    a brain no worker runs within `timeout` seconds, NotResponding."""
    change = _valid(ControlChange, change)
    try:
        check_principal(principal)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        c.BRAIN_WORKFLOW,
        BrainInput(principal=principal, config=config or BrainConfig()),
        id=c.brain_workflow_id(principal),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    looked_at(start.workflow_handle())  # a failed update fails the start's future too
    try:
        return await wait_for(
            client.execute_update_with_start_workflow(
                c.CONTROL_UPDATE,
                change,
                start_workflow_operation=start,
                id=f"control/{uuid.uuid4().hex}",
                result_type=Control,
            ),
            timeout,
        )
    except WorkflowUpdateFailedError as exc:
        raise Conflict(
            f"{principal}'s brain refused the change: {getattr(exc.cause, 'message', None) or exc.cause}"
        ) from None
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise NotResponding(
            f"{principal}'s brain did not take the change within {timeout:g} s: is a worker serving task queue "
            f"{task_queue!r}? It applies if the brain runs later"
        ) from None


async def get_control(client: Client, principal: str) -> Control:
    """The principal's rules and pauses in force (none if no brain runs for them)."""
    try:
        check_principal(principal)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    handle = client.get_workflow_handle(c.brain_workflow_id(principal))
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return Control()
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return Control()  # the next gate starts a new brain, with none
    return await handle.query(c.CONTROL_QUERY, result_type=Control)


async def add_rule(client: Client, principal: str, rule: Rule | Mapping[str, Any], *, by: str, **kw: Any) -> Control:
    return await change_control(client, principal, dict(op="add_rule", by=by, rule=_valid(Rule, rule)), **kw)


async def remove_rule(client: Client, principal: str, name: str, *, by: str, **kw: Any) -> Control:
    return await change_control(client, principal, dict(op="remove_rule", by=by, name=name), **kw)


async def pause(
    client: Client, principal: str, *, by: str, state: str | None = None, task_type: str | None = None, **kw: Any
) -> Control:
    """From the next gate on, no gate of the principal (in this state / task type, if
    given) is answered but by the human, whatever its escalation mode."""
    return await change_control(client, principal, dict(op="pause", by=by, state=state, task_type=task_type), **kw)


async def resume(
    client: Client, principal: str, *, by: str, state: str | None = None, task_type: str | None = None, **kw: Any
) -> Control:
    """Lift the pause of exactly this scope; with no scope, every pause."""
    return await change_control(client, principal, dict(op="resume", by=by, state=state, task_type=task_type), **kw)
