"""One hook call answered: the tool call opened as a gate for its principal, the gate's
result turned into the hook's decision in the asking agent's protocol, or, if the person
has not answered within the hook's wait, the agent's own prompt (Claude Code) or a deny
(Codex, which cannot ask from a hook). Whatever fails, the answer is the agent's failure
answer (`ask`, or Codex's deny): never an allow.

A `PostToolUse` answers nothing and teaches nothing: the hook's token is the agent's, not
the person's, so a call it says ran is no answer of theirs (docs/claude-code.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from vicar.hooks import protocol as p
from vicar.hooks.tool_call import gate_request
from vicar.settings import Settings

log = logging.getLogger("vicar.hooks")

# Vicar's own MCP tools only ask (docs/mcp.md): gating them would ask the person to approve
# an ask. They get no decision: the agent's own permission flow.
OWN_TOOLS = tuple(f"mcp__vicar__{t}" for t in ("ask_approval", "ask_question", "gate_status"))
# A workflow task of the gate's still pending after this long: its worker is absent or
# frozen (a live one takes milliseconds). The hook answers its failure answer well within
# 10 s rather than wait for a person nothing reached. A frozen worker's open poll takes
# the task and never finishes it, which a live worker running a local activity longer
# than this (a brain's turn under heavy contention: Temporal shows nothing of it for up
# to 8 s) also looks like: that reads as silence too, and answers the failure answer,
# which is safe; the gate goes on.
STALL_SECONDS = 5.0
# How often a waiting hook looks at its gate: often while a worker should be taking it
# up, then seldom (a hook may wait minutes for the person; Temporal serves every hook).
WATCH_EVERY, WATCH_EVERY_LATER, WATCH_OFTEN_SECONDS = 0.5, 2.0, 15.0
SILENT = "Vicar's worker did not respond"


class WorkerSilent(Exception):
    """The gate's workflow task waits for a worker that does not take or finish it."""


@dataclass(frozen=True)
class HookAnswer:
    """What goes back to the agent: the JSON, the failure's kind as an exit code (0, or
    65/4/70: protocol.py; protocol.failure_exit gives the agent's own code), and the one
    line a failure prints on stderr."""

    body: dict[str, Any]
    exit_code: int = 0
    problem: str = ""

    @property
    def decision(self) -> str:
        return p.decision_of(self.body)


def fallback(event: str | None, why: str, exit_code: int, agent: str = p.CLAUDE_CODE) -> HookAnswer:
    """A failure's answer: Claude Code asks the person itself; Codex is denied. Says why."""
    why = p.one_line(why, 500)
    then = "denied until it can decide" if agent == p.CODEX else "asking you here"
    return HookAnswer(p.ask(event, f"Vicar could not decide ({why}): {then}", agent), exit_code, why)


def failure(event: str | None, exc: BaseException, agent: str = p.CLAUDE_CODE) -> HookAnswer:
    """The answer for an exception, with the exit code its kind has, in one line."""
    from pydantic import ValidationError

    from vicar.errors import InvalidInput, NotResponding, Unreachable

    if isinstance(exc, ValidationError):
        errors = exc.errors()
        where = ".".join(str(x) for x in errors[0]["loc"]) if errors else ""
        said = errors[0]["msg"] if errors else "invalid"
        return fallback(event, f"bad hook input: {where}: {said}", p.BAD_INPUT_EXIT, agent)
    if isinstance(exc, (p.BadInput, InvalidInput)):
        return fallback(event, f"bad hook input: {exc}", p.BAD_INPUT_EXIT, agent)
    if isinstance(exc, WorkerSilent):
        return fallback(event, f"{SILENT}: {exc}", p.UNREACHABLE_EXIT, agent)
    if isinstance(exc, (Unreachable, NotResponding, OSError, ConnectionError)) or _unavailable(exc):
        return fallback(event, f"Vicar is unreachable: {str(exc)[:200]}", p.UNREACHABLE_EXIT, agent)
    return fallback(event, f"unexpected {type(exc).__name__}: {str(exc)[:200]}", p.FAILED_EXIT, agent)


def _unavailable(exc: BaseException) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(exc, RPCError) and exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


async def answer_call(
    client: Any,
    settings: Settings,
    call: dict[str, Any],
    observer: Any = None,
    *,
    principal: str | None = None,
    agent: str = p.CLAUDE_CODE,
    wait_seconds: float | None = None,
) -> HookAnswer:
    """The answer to one checked hook input (protocol.parse), for `principal` (default the
    configured VICAR_HOOK_PRINCIPAL), asked by `agent`, waiting at most `wait_seconds`
    (default VICAR_HOOK_WAIT_SECONDS). `observer` is accepted for callers of the first
    version and unused: a PostToolUse answers nothing."""
    event = call["hook_event_name"]
    principal = principal or settings.hook.principal
    if principal is None:
        return fallback(event, "no principal: set VICAR_HOOK_PRINCIPAL, or use a principal's hook token", 65, agent)
    if event == p.POST_TOOL_USE:
        return HookAnswer({})  # nothing answered, nothing learned (the module's docstring)
    if call["tool_name"] in OWN_TOOLS:
        return HookAnswer(p.no_decision(event))
    try:
        return await _gate(client, settings, call, principal, agent, wait_seconds)
    except Exception as exc:  # noqa: BLE001  (every failure answers the failure answer, with its line)
        answer = failure(event, exc, agent)
        log.warning("hook: %s %s fell back: %s", event, call.get("tool_name"), answer.problem)
        return answer


async def _gate(
    client: Any, settings: Settings, call: dict[str, Any], principal: str, agent: str, wait_seconds: float | None
) -> HookAnswer:
    from vicar.client import open_gate
    from vicar.models import GateStatus

    event = call["hook_event_name"]
    wait = settings.hook.wait_seconds if wait_seconds is None else min(wait_seconds, settings.hook.wait_seconds)
    request = gate_request(call, settings, principal, agent, wait)
    settings.check_texts(question=request.question, actor_message=request.actor_message)
    handle = await open_gate(client, request, settings.task_queue)
    try:
        result = await result_or_silence(client, handle.workflow_id, handle.result(), wait)
    except TimeoutError:
        where = f" (or at {settings.inbox_url}/gates/{handle.workflow_id})" if settings.inbox_url else ""
        details = await _details(client, handle.gate_id)
        if details is None:
            raise WorkerSilent(f"the gate was not decided within {wait:g} s, and it answers no query") from None
        then = "denied for now; answer it there and retry" if agent == p.CODEX else "asking here"
        if details.status is not GateStatus.escalated:  # the worker is there, still at it
            said = f"Vicar: not decided within {wait:g} s (the gate is {details.status.value}){where}; {then}"
            return HookAnswer(p.ask(event, said, agent))
        # Why it went to the person, where a rule or a pause sent it: the rule by its name.
        note = details.calibration_note if details.calibration_guard in ("rule", "paused") else ""
        why = f", asked because of {p.one_line(note, 200)}" if note else ""
        said = f"Vicar: {principal} has not answered within {wait:g} s{why}{where}; {then}"
        return HookAnswer(p.ask(event, said, agent))
    return HookAnswer(decided(event, result, agent))


async def result_or_silence(client: Any, workflow_id: str, result: Any, wait: float) -> Any:
    """The gate's result within `wait` seconds (TimeoutError past it), or WorkerSilent as
    soon as one of its workflow tasks has waited STALL_SECONDS for a worker."""
    waiting = asyncio.ensure_future(asyncio.wait_for(result, wait))
    watching = asyncio.ensure_future(_watch(client, workflow_id))
    try:
        done, _ = await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
        if waiting in done:
            return waiting.result()
        watching.result()  # raises WorkerSilent (the watch ends no other way but by failing)
        raise AssertionError("unreachable")
    finally:
        for task in (waiting, watching):
            task.cancel()
        await asyncio.gather(waiting, watching, return_exceptions=True)


async def _watch(client: Any, workflow_id: str) -> None:
    """Raise WorkerSilent once the same workflow task has stayed pending STALL_SECONDS
    (timed on this clock: the server's may differ)."""
    seen: tuple[Any, ...] | None = None
    started = since = time.monotonic()
    while True:
        await asyncio.sleep(WATCH_EVERY if time.monotonic() - started < WATCH_OFTEN_SECONDS else WATCH_EVERY_LATER)
        try:
            raw = (await client.get_workflow_handle(workflow_id).describe()).raw_description
        except Exception:  # noqa: BLE001  (a failed look is no evidence either way; the wait goes on)
            continue
        if not raw.HasField("pending_workflow_task"):
            seen = None
            continue
        task = raw.pending_workflow_task
        key = (task.original_scheduled_time.ToNanoseconds(), task.attempt)
        if key != seen:
            seen, since = key, time.monotonic()
        elif time.monotonic() - since >= STALL_SECONDS:
            state = "taken but not finished" if task.started_time.ToNanoseconds() else "not taken"
            raise WorkerSilent(f"the gate's workflow task was {state} for {STALL_SECONDS:g} s (attempt {task.attempt})")


def decided(event: str, result: Any, agent: str = p.CLAUDE_CODE) -> dict[str, Any]:
    """The gate's result in the hook's words: approve allows; reject, correct and withdraw
    deny with the answer's words (the agent reads them); hold, and a gate that timed out,
    leave it to the agent's prompt (Codex: deny). A rule's decision names the rule."""
    by = _who(result)
    action = result.action.value
    words = (result.text or "").strip()
    if result.timed_out or action == "hold":
        return p.ask(event, f"Vicar: {by} says not yet{': ' + words if words else ''}", agent)
    if action == "approve":
        return p.allow(event, f"Vicar: approved by {by}", agent)
    verb = {"reject": "rejected", "correct": "asked for changes", "withdraw": "withdrew it"}.get(action, action)
    return p.deny(event, f"Vicar: {by} {verb}" + (f": {words}" if words else ""), agent)


def _who(result: Any) -> str:
    kind = result.answered_by.value
    if kind == "human":
        return result.responder or result.principal
    if kind == "rule":
        rule = _rule_name(result)
        return f"{result.principal}'s rule {rule}" if rule else f"{result.principal}'s rule"
    if kind == "proxy":
        return f"{result.principal}'s proxy"
    return "nobody"


def _rule_name(result: Any) -> str:
    """The rule that answered, from the gate's note ("rule NAME (approve, by AUTHOR)")."""
    note = (getattr(result, "calibration_note", "") or "").strip()
    if note.startswith("rule "):
        return note[len("rule ") :].split(" (", 1)[0]
    return ""


async def _details(client: Any, gate_id: str) -> Any:
    """The gate's details, or None when no worker answers the query."""
    from vicar.client.gates import gate_details

    try:
        return await asyncio.wait_for(gate_details(client, gate_id), 3.0)
    except Exception:  # noqa: BLE001  (no answer to the query: the worker is not there)
        return None
