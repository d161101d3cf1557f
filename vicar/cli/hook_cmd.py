"""`vicar hook claude-code|codex`: the coding agents' permission hook as a command, JSON on
stdin and stdout (docs/claude-code.md, docs/codex.md). With --url it is a client of the
inbox's hook endpoint (as `python -m vicar.hooks`, which starts faster); without, it opens
the gate on Temporal itself. Never the CLI's usual error rule: every failure prints the
agent's failure answer and exits with the hook's own codes (vicar/hooks/protocol.py).

`vicar hook token` makes and names a principal's hook token; `vicar hook install` writes
an agent's settings with full paths and checks them."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from vicar.cli.base import app, console, friendly
from vicar.hooks import protocol as p

hook_app = typer.Typer(
    no_args_is_help=True, help="Coding agents' permission hooks (docs/claude-code.md, docs/codex.md)."
)
app.add_typer(hook_app, name="hook")

URL_HELP = "The inbox's hook endpoint (http://HOST:PORT/hooks/<agent>); none: Temporal directly."


def _run(agent: str, url: Optional[str], token_file: Optional[str], timeout: Optional[float]) -> None:
    from vicar.hooks import thin
    from vicar.hooks.decide import failure

    if url is not None:
        argv = [agent, "--url", url, "--token-file", token_file or ""]
        argv += ["--timeout", f"{timeout:g}"] if timeout else []
        raise typer.Exit(thin.run(argv, sys.stdin.buffer, sys.stdout, sys.stderr))
    raw = sys.stdin.buffer.read(p.MAX_INPUT_BYTES + 1)
    try:
        answer = asyncio.run(_direct(p.parse(raw), agent))
    except Exception as exc:  # noqa: BLE001  (every failure answers the failure answer: never allow)
        answer = failure(p.event_of(raw), exc, agent)
    sys.stdout.write(json.dumps(answer.body))
    if answer.problem:
        sys.stderr.write(f"vicar hook: {p.one_line(answer.problem, 500)}\n")
    raise typer.Exit(p.failure_exit(agent, answer.exit_code))


@hook_app.command("claude-code")
def claude_code(
    url: Optional[str] = typer.Option(None, "--url", help=URL_HELP),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="The hook token's file (with --url)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="The whole wait, in seconds (with --url)."),
) -> None:
    """Answer one Claude Code hook call: its JSON on stdin, the decision on stdout."""
    _run(p.CLAUDE_CODE, url, token_file, timeout)


@hook_app.command("codex")
def codex(
    url: Optional[str] = typer.Option(None, "--url", help=URL_HELP),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="The hook token's file (with --url)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="The whole wait, in seconds (with --url)."),
) -> None:
    """Answer one Codex hook call: every answer but an approval is a deny (docs/codex.md)."""
    _run(p.CODEX, url, token_file, timeout)


def _answered_here(settings, principal: str) -> bool:
    """Whether an inbox account of this data dir answers for the principal."""
    from vicar.inbox.accounts import list_users

    try:
        return any(account.answers_for(principal) for account in list_users(settings.data_dir))
    except Exception:  # noqa: BLE001  (an unreadable account file: the note is only advice)
        return True


async def _direct(call: dict, agent: str):
    from vicar.hooks.decide import answer_call
    from vicar.runtime.connect import connect
    from vicar.settings import Settings

    settings = Settings.from_env()
    client = await connect(settings)
    return await answer_call(client, settings, call, agent=agent)


@hook_app.command("token")
@friendly
def token(
    principal: Optional[str] = typer.Option(
        None, "--principal", help="The principal whose own token to print the file of (made 0600 on first use)."
    ),
) -> None:
    """Print the file holding a hook token: the principal's own with --principal, else the
    single token of VICAR_HOOK_PRINCIPAL."""
    from vicar.hooks.tokens import TOKEN_VAR, hook_token, principal_token
    from vicar.settings import Settings

    settings = Settings.from_env()
    if principal:
        _, file = principal_token(settings, principal)
        sys.stdout.write(f"{file}\n")
        return
    _, path = hook_token(settings)
    sys.stdout.write(f"{path}\n" if path else f"the token is {TOKEN_VAR}'s value\n")


@hook_app.command("install")
@friendly
def install(
    agent: str = typer.Argument(..., help="claude-code or codex"),
    principal: Optional[str] = typer.Option(
        None, "--principal", help="Whose gates the agent's calls open (default VICAR_HOOK_PRINCIPAL)."
    ),
    url: Optional[str] = typer.Option(
        None, "--url", help="The inbox's address as the agent reaches it (default VICAR_INBOX_URL)."
    ),
    settings_file: Optional[Path] = typer.Option(
        None, "--settings", help="The file to write (default ~/.claude/settings.json; ~/.codex/hooks.json)."
    ),
    wait: Optional[float] = typer.Option(
        None, "--wait", help="How long a call waits for the person, in seconds (default VICAR_HOOK_WAIT_SECONDS)."
    ),
) -> None:
    """Write the agent's hook settings with full paths, then check them: the command
    written is run as the agent will run it (opening nothing) and must name PRINCIPAL."""
    from vicar.errors import InvalidInput
    from vicar.hooks import install as inst
    from vicar.hooks.tokens import principal_token
    from vicar.models import check_principal
    from vicar.settings import Settings

    if agent not in p.AGENTS:
        raise InvalidInput(f"no hook for {agent!r}: use {' or '.join(p.AGENTS)}")
    settings = Settings.from_env()
    who = principal or settings.hook.principal
    if not who:
        raise InvalidInput("whose gates? give --principal (or set VICAR_HOOK_PRINCIPAL)")
    check_principal(who)
    base = url or settings.inbox_url
    if not base:
        raise InvalidInput("where is the inbox? give --url http://HOST:PORT (or set VICAR_INBOX_URL)")
    _, token_file = principal_token(settings, who)
    path = (settings_file or inst.default_settings(agent)).expanduser().absolute()
    command = inst.install(agent, path, base, token_file.absolute(), wait or settings.hook.wait_seconds)
    console.print(f"wrote {path}: {command}", markup=False, highlight=False)
    served = inst.verify(path, agent)
    if served != who:
        raise InvalidInput(f"the endpoint took the token as {served!r}'s, not {who!r}'s")
    console.print(f"checked: the inbox at {base} takes this hook's calls as {who}'s", markup=False, highlight=False)
    if not _answered_here(settings, who):
        console.print(
            f"note: no inbox account in {settings.data_dir} answers for {who}: the gates will wait with no one "
            f"to answer them in this inbox (vicar inbox user add NAME --principal {who})",
            markup=False,
            highlight=False,
        )
    if agent == p.CODEX:
        console.print(
            "Codex runs a new hook only once trusted: open `codex`, then /hooks, and trust it "
            "(an untrusted hook is skipped and the call runs: docs/codex.md)",
            markup=False,
            highlight=False,
        )
