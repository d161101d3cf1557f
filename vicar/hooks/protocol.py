"""The coding agents' hook protocol: Claude Code's, as its hooks reference documents it
(https://code.claude.com/docs/en/hooks; tests/fixtures/claude_code/), and Codex's, which
takes the same input and the same JSON but reads it otherwise (its hooks reference and
source; tests/fixtures/codex/, measured on Codex 0.171.0): the input read and checked,
and each answer in the agent's and the event's own words.

Standard library only: the thin command imports this and nothing heavier.

Exit codes, Claude Code. 2 blocks a PreToolUse call (a deny), so no failure may use it.
Any other non-zero code is a non-blocking error, and with a JSON object on stdout that
passes the schema "the JSON alone decides": every failure prints the event's `ask`
(PermissionRequest has no `ask`: no decision, so its dialog shows), says why on stderr in
one line, and exits with its own code, never 0 and never 2.

Codex. A hook that fails (any exit code but 0 and 2, no answer within its `timeout`, JSON
it does not support: `permissionDecision` `allow` or `ask`) lets the call run, `codex exec`
included. So for Codex every answer but an approval is a `deny`, every failure exits 2
with its line on stderr (Codex's blocking exit; the line is the reason it shows), and an
approval is no objection (`{}` with a systemMessage: Codex's own approval policy goes on).
"""

from __future__ import annotations

import json
from typing import Any

PRE_TOOL_USE, PERMISSION_REQUEST, POST_TOOL_USE = "PreToolUse", "PermissionRequest", "PostToolUse"
EVENTS = (PRE_TOOL_USE, PERMISSION_REQUEST, POST_TOOL_USE)
# A Write of a large file arrives whole in tool_input; past this the input is refused
# (ask) rather than read into memory.
MAX_INPUT_BYTES = 2 * 1024 * 1024
MAX_NAME_CHARS = 200  # tool names, session and tool-use ids: Claude Code's are far shorter
MAX_REASON_CHARS = 2000  # what the agent or the person reads beside a decision

# The inbox endpoint's headers that carry a failure's exit code and line back to the thin command.
EXIT_HEADER, PROBLEM_HEADER = "X-Vicar-Hook-Exit", "X-Vicar-Hook-Problem"

# The failures' exit codes (never 0, never 2 for Claude Code: see above).
BAD_INPUT_EXIT = 65  # EX_DATAERR: not a hook input we know
UNREACHABLE_EXIT = 4  # vicar.errors.Unreachable's: the server, Temporal or the worker did not answer
FAILED_EXIT = 70  # vicar.errors.UNEXPECTED: anything else
CODEX_BLOCK_EXIT = 2  # Codex: every failure (its only exit that blocks the call)

CLAUDE_CODE, CODEX = "claude-code", "codex"
AGENTS = (CLAUDE_CODE, CODEX)
AGENT_NAMES = {CLAUDE_CODE: "Claude Code", CODEX: "Codex"}
# How long the hook's own process waits at most (the thin command's --timeout), so the
# server answers before the agent stops the hook: Codex runs the call when it does.
WAIT_HEADER = "X-Vicar-Hook-Timeout"


def failure_exit(agent: str, code: int) -> int:
    """The exit code of a failure of kind `code` (65, 4, 70) in the agent's protocol."""
    if not code:
        return 0
    return CODEX_BLOCK_EXIT if agent == CODEX else code


class BadInput(ValueError):
    """The hook's input is not what the protocol documents (one line, no traceback)."""


def parse(raw: bytes) -> dict[str, Any]:
    """The hook input, checked: a JSON object naming a known event, a tool and its input."""
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput(f"the hook input is over {MAX_INPUT_BYTES // 1024 // 1024} MiB")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"the hook input is not JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise BadInput("the hook input is not a JSON object")
    event = data.get("hook_event_name")
    if event not in EVENTS:
        raise BadInput(f"hook_event_name {str(event)[:60]!r} is not one of {', '.join(EVENTS)}")
    for name in ("tool_name", "session_id"):
        value = data.get(name)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
            raise BadInput(f"{name} must be a string of 1-{MAX_NAME_CHARS} characters")
    if not isinstance(data.get("tool_input"), dict):
        raise BadInput("tool_input must be a JSON object")
    use_id = data.get("tool_use_id")
    if use_id is not None and (not isinstance(use_id, str) or not use_id or len(use_id) > MAX_NAME_CHARS):
        raise BadInput(f"tool_use_id must be a string of 1-{MAX_NAME_CHARS} characters")
    if event == POST_TOOL_USE and use_id is None:
        raise BadInput("a PostToolUse input needs its tool_use_id")
    if not isinstance(data.get("cwd", ""), str):
        raise BadInput("cwd must be a string")
    try:
        # JSON may escape a lone surrogate (backslash-u d800), which no UTF-8 text holds: refused
        # here, not deep inside the gate's models.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("the hook input holds a lone surrogate: not text") from None
    return data


def event_of(raw: bytes) -> str | None:
    """The event a possibly malformed input names, so a failure still answers in its words."""
    try:
        event = json.loads(raw[:MAX_INPUT_BYTES]).get("hook_event_name")
    except (ValueError, AttributeError, RecursionError):
        return None
    return event if event in EVENTS else None


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """A reason as one line (a multi-line error never reaches the agent's prompt as is)."""
    return _clip(" ".join(str(text).split()), limit)


def _clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def allow(event: str, reason: str, agent: str = CLAUDE_CODE) -> dict[str, Any]:
    if event == PERMISSION_REQUEST:
        return {"hookSpecificOutput": {"hookEventName": event, "decision": {"behavior": "allow"}}}
    if agent == CODEX:
        # Codex supports no `allow` without a rewritten input (a failed hook): no
        # objection, and the reason where the person reads it.
        return {"systemMessage": one_line(reason)} if reason else {}
    return _pre(event, "allow", reason)


def deny(event: str, reason: str, agent: str = CLAUDE_CODE) -> dict[str, Any]:
    reason = reason.strip() or "Vicar: denied"  # Codex refuses a deny without a reason
    if event == PERMISSION_REQUEST:
        return {
            "hookSpecificOutput": {"hookEventName": event, "decision": {"behavior": "deny", "message": _clip(reason)}}
        }
    if event == POST_TOOL_USE:  # the call ran: nothing to deny
        return {"systemMessage": one_line(reason)}
    return _pre(event, "deny", reason)


def ask(event: str | None, reason: str, agent: str = CLAUDE_CODE) -> dict[str, Any]:
    """The agent asks the person itself. Claude Code's PreToolUse: `ask` (the reason shown
    in its prompt); PermissionRequest has no `ask`: no decision, so the dialog it was
    about to show shows; PostToolUse and an unknown event: nothing to decide. The reason
    reaches the person as a systemMessage too. Codex cannot ask from a hook: a deny."""
    if agent == CODEX and event in (PRE_TOOL_USE, PERMISSION_REQUEST):
        return deny(event, reason, agent)
    if event == PRE_TOOL_USE:
        return _pre(event, "ask", reason)
    return {"systemMessage": one_line(reason)} if reason else {}


def for_agent(answer: dict[str, Any], event: str | None, agent: str) -> dict[str, Any]:
    """An answer as the agent must read it: a Claude Code answer reaching Codex (a thin
    command pointed at the wrong endpoint) would fail there, and a failed hook runs the
    call; so its `allow` becomes no objection and its `ask` a deny."""
    if agent != CODEX:
        return answer
    out = answer.get("hookSpecificOutput") or {}
    decision = out.get("permissionDecision")
    reason = str(out.get("permissionDecisionReason") or "")
    if decision == "allow":
        return allow(PRE_TOOL_USE, reason, agent)
    if decision == "ask":
        return deny(PRE_TOOL_USE, reason or "Vicar: not approved", agent)
    return answer


def no_decision(event: str | None) -> dict[str, Any]:
    """Nothing to say: the agent's own permission flow goes on (Vicar's own MCP tools)."""
    return {}


def _pre(event: str, decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": event,
            "permissionDecision": decision,
            "permissionDecisionReason": _clip(reason),
        }
    }


def decision_of(answer: dict[str, Any], agent: str = CLAUDE_CODE) -> str:
    """allow, deny or ask: what an answer of this module's decides (for logs and tests).
    No decision is Claude Code's own flow (`ask`), and Codex's no objection (`allow`)."""
    out = answer.get("hookSpecificOutput") or {}
    if "permissionDecision" in out:
        return str(out["permissionDecision"])
    behavior = (out.get("decision") or {}).get("behavior")
    if behavior:
        return str(behavior)
    return "allow" if agent == CODEX else "ask"
