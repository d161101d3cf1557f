"""A coding agent's tool call as a gate: the tool is the task type, what it would do is the
artifact (the command, the edit's diff, the fetched URL), the state an intent to act.

The gate id comes from the call itself, so a retried hook attaches to its gate and a
`PostToolUse` finds the gate of the `PreToolUse` it follows (both carry `tool_use_id`).
`PermissionRequest` carries none: its gate gets a fresh id, and what the person then
answers in the agent's own prompt is not observed (docs/claude-code.md)."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import uuid
from typing import Any
from urllib.parse import urlsplit

from vicar.hooks import command_kind
from vicar.hooks.protocol import AGENT_NAMES, CLAUDE_CODE, PERMISSION_REQUEST
from vicar.memory.text import clip
from vicar.models import GateRequest
from vicar.models.limits import DEFAULT_LIMITS, TASK_TYPE_CHARS, TITLE_CHARS
from vicar.settings import Settings

AGENT = CLAUDE_CODE  # the default agent (the gate id's prefix and upstream_agent are the agent's)
GATE_PREFIX = f"{AGENT}/"
# After the hook has fallen back to the agent's prompt, the gate stays open this long so
# the PostToolUse that shows the call ran can record it, and the person may still answer
# it in the inbox (their answer is learned); then it ends timed_out and nothing is learned.
OBSERVE_SECONDS = 3600.0
QUESTION_CHARS = 300
SHELLS = ("bash", "powershell")
FILE_TOOLS = ("edit", "multiedit", "write", "read", "notebookedit")
PATCH_TOOLS = ("apply_patch",)  # Codex's edits: one patch in tool_input.command
PATCH_FILES = ("*** Add File:", "*** Update File:", "*** Delete File:")  # a Codex patch's file lines


def gate_id_for(session_id: str, tool_use_id: str, agent: str = AGENT) -> str:
    """The gate of one tool call (its ids are the agent's, so hashed into the id's alphabet)."""
    return f"{agent}/" + hashlib.sha256(f"{session_id}\0{tool_use_id}".encode()).hexdigest()[:40]


def _fresh_gate_id(call: dict[str, Any], agent: str) -> str:
    digest = hashlib.sha256(f"{call['session_id']}\0{_canonical(call['tool_input'])}".encode()).hexdigest()
    return f"{agent}/{digest[:24]}-{uuid.uuid4().hex[:12]}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, lines kept (clip makes one line: for the question only)."""
    return text if len(text) <= limit else text[: limit - 30] + "\n... (cut: too long to show)"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _relative(path: str, cwd: str) -> str:
    """The path as the person reads it: relative to the agent's directory when under it
    (only shown, never opened)."""
    if cwd and path.startswith(cwd.rstrip("/\\") + os.sep):
        return path[len(cwd.rstrip("/\\")) + 1 :]
    return path


def _command_key(command: str) -> str:
    """The program and its subcommand (`git push`, `npm test`): the lineage that lets the
    proxy learn a habit per kind of command rather than per exact line."""
    return command_kind.kind(command)


def _file_key(path: str, cwd: str) -> str:
    """The kind of file a tool touches (`*.py`, `Makefile`), and whether it is outside the
    agent's directory: a kind of action, where the path itself is an argument."""
    name = os.path.basename(path.rstrip("/\\")) or path
    stem, ext = os.path.splitext(name)
    key = f"*{ext}" if stem and ext else name
    outside = os.path.isabs(path) and not (cwd and path.startswith(cwd.rstrip("/\\") + os.sep))
    return f"outside {key}" if outside else key


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def describe(tool: str, args: dict[str, Any], cwd: str) -> tuple[str, str, str]:
    """(summary for the question, artifact, lineage key) of one tool call."""
    name = tool.lower()
    if name in SHELLS:
        command = _text(args.get("command"))
        return clip(command, 120), f"$ {command}\n", _command_key(command)
    if name in FILE_TOOLS:
        path = _relative(_text(args.get("file_path")) or _text(args.get("notebook_path")), cwd)
        if name == "edit":
            artifact = _diff(path, _text(args.get("old_string")), _text(args.get("new_string")))
            if args.get("replace_all"):
                artifact = "(every occurrence)\n" + artifact
        elif name == "multiedit":
            given = args.get("edits")
            edits: list[Any] = given if isinstance(given, list) else []
            artifact = "".join(
                _diff(path, _text(e.get("old_string")), _text(e.get("new_string")))
                for e in edits
                if isinstance(e, dict)
            )
        elif name == "write":
            artifact = _diff(path, "", _text(args.get("content"))).replace(f"--- a/{path}", "--- /dev/null", 1)
        else:
            artifact = _canonical(args)
        return path, artifact, _file_key(_text(args.get("file_path")) or _text(args.get("notebook_path")), cwd)
    if name in PATCH_TOOLS:
        patch = _text(args.get("command")) or _text(args.get("patch")) or _text(args.get("input"))
        files = [line.split(":", 1)[1].strip() for line in patch.splitlines() if line.startswith(PATCH_FILES)]
        summary = ", ".join(_relative(f, cwd) for f in files[:3]) or "a patch"
        return clip(summary, 200), patch, _file_key(files[0], cwd) if files else ""
    if name == "webfetch":
        url = _text(args.get("url"))
        prompt = _text(args.get("prompt"))
        return clip(url, 200), url + (f"\n\n{prompt}" if prompt else ""), urlsplit(url).hostname or ""
    if name == "websearch":
        query = _text(args.get("query"))
        return clip(query, 120), _canonical(args), ""
    return clip(_canonical(args), 120), json.dumps(args, sort_keys=True, indent=2, ensure_ascii=False, default=str), ""


def gate_request(
    call: dict[str, Any], settings: Settings, principal: str, agent: str = AGENT, wait_seconds: float | None = None
) -> GateRequest:
    """The gate for a PreToolUse or PermissionRequest input (checked by protocol.parse),
    asked by `agent` (claude-code, codex): its name is in the question, the gate id and
    the upstream agent."""
    tool, args, cwd = call["tool_name"], call["tool_input"], call.get("cwd") or ""
    summary, artifact, key = describe(tool, args, cwd)
    use_id = call.get("tool_use_id")
    gate_id = (
        gate_id_for(call["session_id"], use_id, agent)
        if use_id and call["hook_event_name"] != PERMISSION_REQUEST
        else _fresh_gate_id(call, agent)
    )
    wait = settings.hook.wait_seconds if wait_seconds is None else wait_seconds
    words = [_text(args.get("description")), _text(args.get("prompt")) if tool.lower() != "webfetch" else ""]
    where = f" in {cwd}" if cwd else ""
    limit = min(settings.limits.artifact_text, DEFAULT_LIMITS.artifact_text)
    return GateRequest(
        principal=principal,
        gate_id=gate_id,
        state="INTENT_ASSERT",
        task_type=clip(tool.lower(), TASK_TYPE_CHARS),
        question=clip(
            f"{AGENT_NAMES.get(agent, agent)} asks to use {tool}{where}: {summary or '(no input)'}. Allow?",
            QUESTION_CHARS,
        ),
        artifact_text=_cut(artifact, limit),
        actor_message=clip(" ".join(w for w in words if w), min(settings.limits.actor_message, 2000)),
        upstream_agent=agent,
        title=clip(summary if tool.lower() in FILE_TOOLS else key, TITLE_CHARS),
        lineage=clip(f"{tool.lower()}:{key}", TITLE_CHARS) if key else None,
        deadline_seconds=wait + OBSERVE_SECONDS,
    )
