"""`vicar hook install claude-code|codex`: the agent's hook settings written with full paths
(this Python, the principal's token file, the inbox's URL) and then checked by running the
very command written, as the agent will run it, with `--check` (it opens nothing).

Claude Code: `~/.claude/settings.json` (or --settings), its `hooks.PreToolUse` list;
Codex: `$CODEX_HOME/hooks.json` (default `~/.codex/hooks.json`), the same shape with one
`command` string and `timeout` in seconds (Codex 0.171.0 ignored `timeout_sec` and an
`args` list). Vicar's earlier entries are replaced, anyone else's kept; the file is
written whole, aside, then moved into place."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vicar.hooks import protocol as p

# The tools whose calls become gates. Reads (Read, Glob, Grep) are left out: every call
# matched is a gate. Vicar's own MCP tools only ask: never gated (the hook answers them no
# decision as well, for Codex, whose matchers have no look-ahead).
CLAUDE_MATCHER = "Bash|Edit|MultiEdit|Write|NotebookEdit|WebFetch|mcp__(?!vicar__).*"
CODEX_MATCHER = "Bash|apply_patch|mcp__.*"
# The agent stops a hook at its `timeout`: well after Vicar's own answer (the thin
# command's --timeout, which the server answers before).
AGENT_MARGIN, THIN_MARGIN = 60, 30
MARK = "vicar.hooks"  # how Vicar's own entries are known again


@dataclass(frozen=True)
class Installed:
    path: Path
    command: str
    principal: str


def default_settings(agent: str) -> Path:
    if agent == p.CODEX:
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "hooks.json"
    return Path.home() / ".claude" / "settings.json"


def hook_command(agent: str, url: str, token_file: Path, timeout: float, python: str | None = None) -> str:
    """The command the agent runs, every path absolute. Codex's ends in `|| exit 2`: a
    Python that cannot even start fails closed (Codex runs the call on any other exit)."""
    argv = [python or sys.executable, "-m", MARK, agent, "--url", url, "--token-file", str(token_file)]
    argv += ["--timeout", f"{timeout:g}"]
    command = shlex.join(argv)
    return f"{command} || exit 2" if agent == p.CODEX else command


def endpoint(base_url: str, agent: str) -> str:
    return f"{base_url.rstrip('/')}/hooks/{agent}"


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARK in str(hook.get("command", "")) + " ".join(map(str, hook.get("args", [])))


def merged(existing: dict[str, Any], agent: str, command: str, timeout: int) -> dict[str, Any]:
    """The settings with Vicar's PreToolUse hook in place of any earlier one of Vicar's
    (in any event: the first version also hooked PostToolUse), the rest untouched."""
    settings = dict(existing)
    hooks = dict(settings.get("hooks") or {})
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                group = {**group, "hooks": [h for h in group["hooks"] if not _ours(h)]}
                if not group["hooks"]:
                    continue
            kept.append(group)
        hooks[event] = kept
    matcher = CODEX_MATCHER if agent == p.CODEX else CLAUDE_MATCHER
    ours = {"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}
    hooks[p.PRE_TOOL_USE] = [*hooks.get(p.PRE_TOOL_USE, []), ours]
    settings["hooks"] = {event: groups for event, groups in hooks.items() if groups}
    return settings


def write_settings(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(settings, indent=2) + "\n")
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)


def read_settings(path: Path) -> dict[str, Any]:
    from vicar.errors import InvalidInput

    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text() or "{}")
    except (ValueError, UnicodeError) as exc:
        raise InvalidInput(f"{path} is not JSON ({exc}): fix or move it, then install again") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} is not a JSON object: fix or move it, then install again")
    return data


def install(agent: str, path: Path, url: str, token_file: Path, wait: float) -> str:
    """Write the hook into the agent's settings at `path`; the command written."""
    thin = wait + THIN_MARGIN
    command = hook_command(agent, endpoint(url, agent), token_file, thin)
    write_settings(path, merged(read_settings(path), agent, command, int(thin + AGENT_MARGIN)))
    return command


def verify(path: Path, agent: str) -> str:
    """Check the settings at `path` as the agent will read them: Vicar's hook is there, its
    program and token file exist, and its command, run by the shell with `--check`, is
    answered by the endpoint with a principal. Returns the principal; raises InvalidInput
    saying what is wrong."""
    from vicar.errors import InvalidInput

    groups = (read_settings(path).get("hooks") or {}).get(p.PRE_TOOL_USE) or []
    hooks = [h for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if _ours(h)]
    if len(hooks) != 1:
        raise InvalidInput(f"{path}: {len(hooks)} Vicar PreToolUse hooks, not 1")
    command = str(hooks[0]["command"]).removesuffix(" || exit 2")
    argv = shlex.split(command)
    if not os.path.isabs(argv[0]) or not os.access(argv[0], os.X_OK):
        raise InvalidInput(f"{path}: the hook's program {argv[0]!r} is not an executable full path")
    token_file = argv[argv.index("--token-file") + 1]
    if not os.path.isabs(token_file) or not os.path.isfile(token_file):
        raise InvalidInput(f"{path}: the hook's token file {token_file!r} is not a full path to a file")
    done = subprocess.run(
        ["/bin/sh", "-c", f"{command} --check"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise InvalidInput(f"the hook's command failed its check: {done.stderr.strip() or done.returncode}")
    answer = json.loads(done.stdout)
    if answer.get("agent") != agent:
        raise InvalidInput(f"the hook's endpoint serves {answer.get('agent')!r}, not {agent!r}")
    return str(answer["principal"])
