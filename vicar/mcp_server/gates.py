"""What the MCP tools do, free of the MCP SDK: open a gate (or an agent's question) for
the principal this server was started for, wait for its answer up to the caller's bound,
and poll a gate by id. Every input is a pydantic model with bounded sizes; every refusal
is one VicarError line, which the server hands the client as the tool's error.

The principal is fixed when the server starts (`vicar mcp --principal`), never an
argument: an agent asks its own person, and cannot poll another principal's gates (a
gate of someone else reads as no gate at all)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client, WorkflowFailureError

from vicar.client.gates import find_gate, query_details, start_gate, started_with
from vicar.errors import InvalidInput, NotFound, validation_summary
from vicar.models import NAME_CHARS, TITLE_CHARS, GateRequest, GateResult
from vicar.models.limits import DEFAULT_LIMITS, TASK_TYPE_CHARS
from vicar.models.vocabulary import CfAState, RequestKind
from vicar.settings import Settings

# An MCP client holds its tool call open while the tool waits; most give up after a
# minute or a few, so the wait is the caller's to choose and bounded here. Past it the
# caller gets the gate id and polls.
MAX_WAIT_SECONDS = 600.0
DEFAULT_WAIT_SECONDS = 30.0
GATE_ID_PREFIX = "mcp-"

Wait = Field(
    DEFAULT_WAIT_SECONDS,
    ge=0,
    le=MAX_WAIT_SECONDS,
    description=f"Seconds to wait for the answer (0 to {MAX_WAIT_SECONDS:g}); past it the gate id comes back to poll.",
)


class AskGate(BaseModel):
    """An approval gate: may the agent go on with this intent, plan or finished work?"""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    task_type: str = Field(min_length=1, max_length=TASK_TYPE_CHARS, description="The kind of work, e.g. db-migration.")
    question: str = Field(min_length=1, max_length=DEFAULT_LIMITS.question, description="What the person is asked.")
    state: CfAState = Field(
        CfAState.PLAN_ASSERT,
        description="INTENT_ASSERT, PLAN_ASSERT or WORK_ASSERT: approving an intent, a plan, finished work.",
    )
    artifact_text: str = Field(
        "", max_length=DEFAULT_LIMITS.artifact_text, description="What is under review, inline (a plan, a diff)."
    )
    actor_message: str = Field(
        "", max_length=DEFAULT_LIMITS.actor_message, description="The agent's own words to the person."
    )
    title: str = Field("", max_length=TITLE_CHARS, description="The artifact's title (a patch subject, a branch).")
    upstream_agent: str | None = Field(None, max_length=NAME_CHARS, description="The agent asking.")
    # An agent may ask for the person always; never for the proxy alone: that is the person's to grant.
    escalation_mode: Literal["when_unsure", "always"] = Field(
        "when_unsure", description="when_unsure: the proxy answers where it has earned it; always: the person answers."
    )
    gate_id: str | None = Field(
        None,
        max_length=200,
        description="Your own id for the gate (the same request again attaches to it); default: generated.",
    )
    wait_seconds: float = Wait


class AskQuestion(BaseModel):
    """An agent's question to the person mid-task; the answer is text."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    task_type: str = Field(min_length=1, max_length=TASK_TYPE_CHARS, description="The kind of work, e.g. db-migration.")
    question: str = Field(min_length=1, max_length=DEFAULT_LIMITS.question, description="The question.")
    context: str = Field("", max_length=DEFAULT_LIMITS.actor_message, description="What the agent was doing.")
    state: CfAState = Field(CfAState.WORK_ASSERT, description="Where in its work the agent is.")
    gate_id: str | None = Field(None, max_length=200, description="Your own id for the question; default: generated.")
    wait_seconds: float = Wait


class PollGate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    gate_id: str = Field(min_length=1, max_length=200, description="The id a call to ask_* returned.")
    wait_seconds: float = Field(
        0.0, ge=0, le=MAX_WAIT_SECONDS, description="Seconds to wait for the answer if there is none yet."
    )


class GateOutcome(BaseModel):
    """What an ask or a poll returns: the answer, or that the gate still waits."""

    gate_id: str
    status: Literal["answered", "waiting", "ended"] = Field(
        description="answered: act on `action`; waiting: poll `gate_id` later; ended: cancelled or failed, see `note`."
    )
    action: str | None = Field(None, description="approve, correct, reject, hold, withdraw; answer for a question.")
    text: str = Field("", description="The person's words (or the proxy's in their voice): the correction, the reason.")
    answered_by: str | None = Field(None, description="human, proxy, rule, or nobody (the deadline passed).")
    responder: str | None = None
    waiting_for: str | None = Field(None, description="While waiting: queued, consulting, or escalated (the person).")
    note: str = ""


def _valid(model: type[BaseModel], args: dict[str, Any]) -> Any:
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise InvalidInput(f"invalid arguments: {validation_summary(exc)}") from None


def gate_request(principal: str, ask: AskGate | AskQuestion) -> GateRequest:
    """The GateRequest an ask opens, checked as the CLI checks one (the model's rules)."""
    fields: dict[str, Any] = dict(
        principal=principal,
        gate_id=ask.gate_id or f"{GATE_ID_PREFIX}{uuid.uuid4().hex[:16]}",
        state=ask.state,
        task_type=ask.task_type,
        question=ask.question,
    )
    if isinstance(ask, AskQuestion):
        fields.update(kind=RequestKind.question, actor_message=ask.context)
    else:
        fields.update(
            artifact_text=ask.artifact_text,
            actor_message=ask.actor_message,
            title=ask.title,
            upstream_agent=ask.upstream_agent or None,
            escalation_mode=ask.escalation_mode,
        )
    try:
        return GateRequest(**fields)
    except ValidationError as exc:
        raise InvalidInput(f"invalid arguments: {validation_summary(exc)}") from None


class GateTools:
    """The tools' work for one principal over one Temporal client."""

    def __init__(self, client: Client, settings: Settings, principal: str) -> None:
        self.client = client
        self.settings = settings
        self.principal = principal

    async def ask(self, kind: type[AskGate] | type[AskQuestion], args: dict[str, Any]) -> GateOutcome:
        ask = _valid(kind, args)
        req = gate_request(self.principal, ask)
        # The deployment's own limits, which may be lower than the model's.
        texts = dict(question=req.question, actor_message=req.actor_message, artifact_text=req.artifact_text)
        self.settings.check_texts(**texts)
        handle = await start_gate(self.client, req, self.settings.task_queue)
        return await self._outcome(req.gate_id, handle.id, ask.wait_seconds)

    async def poll(self, args: dict[str, Any]) -> GateOutcome:
        poll: PollGate = _valid(PollGate, args)
        handle, _ = await find_gate(self.client, poll.gate_id)
        req = await started_with(handle)
        if req is None or req.principal != self.principal:
            raise NotFound(f"no gate {poll.gate_id!r}")  # another person's gate is none of this agent's
        return await self._outcome(req.gate_id, handle.id, poll.wait_seconds)

    async def _outcome(self, gate_id: str, workflow_id: str, wait: float) -> GateOutcome:
        handle = self.client.get_workflow_handle(workflow_id, result_type=GateResult)
        try:
            result: GateResult = await asyncio.wait_for(handle.result(), wait)
        except TimeoutError:
            details = await query_details(handle, gate_id)
            return GateOutcome(
                gate_id=gate_id,
                status="waiting",
                waiting_for=details.status.value if details else None,
                note=f"poll with gate_status(gate_id={gate_id!r})",
            )
        except WorkflowFailureError:
            desc = await handle.describe()
            status = desc.status.name.lower() if desc.status else "ended"
            return GateOutcome(gate_id=gate_id, status="ended", note=f"the gate ended without an answer: {status}")
        if result.timed_out:
            guess = result.proxy_action.value if result.proxy_action else "none"
            return GateOutcome(
                gate_id=gate_id,
                status="ended",
                action=result.action.value,
                answered_by=result.answered_by.value,
                note=f"the gate's deadline passed with no answer (the proxy's guess: {guess}): do not go on",
            )
        return GateOutcome(
            gate_id=gate_id,
            status="answered",
            action=result.action.value,
            text=result.text,
            answered_by=result.answered_by.value,
            responder=result.responder,
        )
