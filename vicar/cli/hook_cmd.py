"""`vicar hook claude-code`: Claude Code's (and Codex's) permission hook as a command,
JSON on stdin and stdout (docs/claude-code.md). With --url it is a client of the inbox's
hook endpoint (as `python -m vicar.hooks`, which starts faster); without, it opens the
gate on Temporal itself. Never the CLI's usual error rule: exit 2 would block the tool
call, so every failure prints the event's `ask` and exits with the hook's own codes
(vicar/hooks/protocol.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Optional

import typer

from vicar.cli.base import app, friendly
from vicar.hooks import protocol as p

hook_app = typer.Typer(no_args_is_help=True, help="Coding agents' permission hooks (docs/claude-code.md).")
app.add_typer(hook_app, name="hook")


@hook_app.command("claude-code")
def claude_code(
    url: Optional[str] = typer.Option(
        None, "--url", help="The inbox's hook endpoint (http://HOST:PORT/hooks/claude-code); none: Temporal directly."
    ),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="The hook token's file (with --url)."),
) -> None:
    """Answer one hook call: its JSON on stdin, the decision on stdout."""
    from vicar.hooks import thin
    from vicar.hooks.decide import failure

    if url is not None:
        argv = ["claude-code", "--url", url, "--token-file", token_file or ""]
        raise typer.Exit(thin.run(argv, sys.stdin.buffer, sys.stdout, sys.stderr))
    raw = sys.stdin.buffer.read(p.MAX_INPUT_BYTES + 1)
    try:
        answer = asyncio.run(_direct(p.parse(raw)))
    except Exception as exc:  # noqa: BLE001  (every failure answers ask: never allow)
        answer = failure(p.event_of(raw), exc)
    sys.stdout.write(json.dumps(answer.body))
    if answer.problem:
        sys.stderr.write(f"vicar hook: {' '.join(answer.problem.split())[:500]}\n")
    raise typer.Exit(answer.exit_code)


async def _direct(call: dict):
    from vicar.hooks.decide import answer_call
    from vicar.runtime.connect import connect
    from vicar.settings import Settings

    settings = Settings.from_env()
    client = await connect(settings)
    return await answer_call(client, settings, call)


@hook_app.command("token")
@friendly
def token() -> None:
    """Print the file holding the hook endpoint's token (made 0600 on first use)."""
    from vicar.hooks.http import TOKEN_VAR, hook_token
    from vicar.settings import Settings

    _, path = hook_token(Settings.from_env())
    sys.stdout.write(f"{path}\n" if path else f"the token is {TOKEN_VAR}'s value\n")
