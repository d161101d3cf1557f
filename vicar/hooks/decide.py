"""One hook call answered: the tool call opened as a gate for the configured principal,
the gate's result turned into the hook's decision, or, if the person has not answered
within the hook's wait, the agent's own prompt. A `PostToolUse` records what the person
allowed in that prompt. Whatever fails, the answer is `ask`: never `allow`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from vicar.hooks import protocol as p
from vicar.hooks.tool_call import gate_id_for, gate_request
from vicar.settings import Settings

log = logging.getLogger("vicar.hooks")

OBSERVED_TEXT = "allowed in Claude Code's own prompt (observed: the tool ran, PostToolUse)"
ANSWER_SECONDS = 10.0  # an observed answer is bookkeeping: it must not hold the agent long


@dataclass(frozen=True)
class HookAnswer:
    """What goes back to the agent: the JSON, the process's exit code (0, or a failure's:
    protocol.py), and the one line a failure prints on stderr."""

    body: dict[str, Any]
    exit_code: int = 0
    problem: str = ""

    @property
    def decision(self) -> str:
        return p.decision_of(self.body)


def fallback(event: str | None, why: str, exit_code: int) -> HookAnswer:
    """A failure's answer: the agent asks the person itself, and says why."""
    return HookAnswer(p.ask(event, f"Vicar could not decide ({why}): asking you here"), exit_code, why)


def failure(event: str | None, exc: BaseException) -> HookAnswer:
    """The answer for an exception, with the exit code its kind has."""
    from vicar.errors import InvalidInput, NotResponding, Unreachable

    if isinstance(exc, (p.BadInput, InvalidInput)):
        return fallback(event, f"bad hook input: {exc}", p.BAD_INPUT_EXIT)
    if isinstance(exc, (Unreachable, NotResponding, OSError, ConnectionError)) or _unavailable(exc):
        return fallback(event, f"Vicar is unreachable: {str(exc)[:200]}", p.UNREACHABLE_EXIT)
    return fallback(event, f"unexpected {type(exc).__name__}: {str(exc)[:200]}", p.FAILED_EXIT)


def _unavailable(exc: BaseException) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(exc, RPCError) and exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


async def answer_call(client: Any, settings: Settings, call: dict[str, Any], observer: Any = None) -> HookAnswer:
    """The answer to one checked hook input (protocol.parse). `observer`: the client that
    records a PostToolUse's observed answer (the inbox's client in the principal's name;
    default `client`)."""
    event = call["hook_event_name"]
    principal = settings.hook.principal
    if principal is None:
        return fallback(event, "no principal: set VICAR_HOOK_PRINCIPAL", p.BAD_INPUT_EXIT)
    try:
        if event == p.POST_TOOL_USE:
            await observe(observer or client, call, principal)
            return HookAnswer({})
        return await _gate(client, settings, call, principal)
    except Exception as exc:  # noqa: BLE001  (every failure answers ask, with its line)
        answer = failure(event, exc)
        log.warning("hook: %s %s fell back to the agent's prompt: %s", event, call.get("tool_name"), answer.problem)
        return answer


async def _gate(client: Any, settings: Settings, call: dict[str, Any], principal: str) -> HookAnswer:
    from vicar.client import open_gate

    event = call["hook_event_name"]
    request = gate_request(call, settings, principal)
    settings.check_texts(question=request.question, actor_message=request.actor_message)
    handle = await open_gate(client, request, settings.task_queue)
    wait = settings.hook.wait_seconds
    try:
        result = await handle.result(timeout=wait)
    except TimeoutError:
        where = f" (or at {settings.inbox_url}/gates/{handle.workflow_id})" if settings.inbox_url else ""
        return HookAnswer(
            p.ask(event, f"Vicar: {principal} has not answered within {wait:g} s{where}; asking here"),
        )
    return HookAnswer(decided(event, result))


def decided(event: str, result: Any) -> dict[str, Any]:
    """The gate's result in the hook's words: approve allows; reject, correct and withdraw
    deny with the answer's words (the agent reads them); hold, and a gate that timed out,
    leave it to the agent's prompt."""
    by = _who(result)
    action = result.action.value
    words = (result.text or "").strip()
    if result.timed_out or action == "hold":
        return p.ask(event, f"Vicar: {by} says not yet{': ' + words if words else ''}")
    if action == "approve":
        return p.allow(event, f"Vicar: approved by {by}")
    verb = {"reject": "rejected", "correct": "asked for changes", "withdraw": "withdrew it"}.get(action, action)
    return p.deny(event, f"{by} {verb}" + (f": {words}" if words else ""))


def _who(result: Any) -> str:
    kind = result.answered_by.value
    if kind == "human":
        return result.responder or result.principal
    if kind == "rule":
        return f"{result.principal}'s rule"
    if kind == "proxy":
        return f"{result.principal}'s proxy"
    return "nobody"


async def observe(client: Any, call: dict[str, Any], principal: str) -> None:
    """A PostToolUse: the call ran. If its gate still waits (the hook fell back to the
    agent's prompt and the person allowed it there), that is the person's answer: approve.
    A gate already decided, or none, records nothing; nothing is inferred from a call that
    did not run (a denial in the prompt is not observed)."""
    from vicar.client import answer
    from vicar.errors import Conflict, NotFound

    gate_id = gate_id_for(call["session_id"], call["tool_use_id"])
    try:
        if not await _waits_for_person(client, gate_id):
            return
        await asyncio.wait_for(
            answer(client, gate_id, dict(action="approve", text=OBSERVED_TEXT, responder=principal), ANSWER_SECONDS),
            ANSWER_SECONDS + 5,
        )
    except (NotFound, Conflict):
        return  # decided by Vicar (or answered in the inbox), or opened by no hook of ours


async def _waits_for_person(client: Any, gate_id: str) -> bool:
    """Whether the gate waits for the person, once it has got that far: a gate still being
    consulted (the hook gave up waiting before the proxy finished) is given a few seconds."""
    from vicar.client.gates import gate_details
    from vicar.models import GateStatus

    deadline = asyncio.get_running_loop().time() + ANSWER_SECONDS
    while True:
        details = await gate_details(client, gate_id)
        status = details.status if details else None
        if status is GateStatus.escalated:
            return True
        if status not in (GateStatus.queued, GateStatus.consulting) or asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.2)
