"""`vicar inbox`: the human's web inbox (docs/inbox.md), and its accounts."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from typing import Optional

import typer

from vicar.cli.base import app, console, err, friendly, open_client
from vicar.display import text
from vicar.runtime.listening import listen
from vicar.settings import Settings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

inbox_app = typer.Typer(
    help="The human's web inbox: the waiting gates, answered in one tap (docs/inbox.md).",
    invoke_without_command=True,
)
user_app = typer.Typer(no_args_is_help=True, help="Inbox accounts: who may sign in.")
inbox_app.add_typer(user_app, name="user")
app.add_typer(inbox_app, name="inbox")


@inbox_app.callback()
@friendly
def inbox(
    ctx: typer.Context,
    host: str = typer.Option(DEFAULT_HOST, "--host", help="Address to listen on (loopback: put TLS in front)."),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Port to listen on."),
    secure_cookies: bool = typer.Option(
        False, "--secure-cookies", help="Send the session cookie over HTTPS only (behind a TLS reverse proxy)."
    ),
) -> None:
    """Serve the inbox (with no subcommand)."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from vicar.inbox.accounts import list_users
    from vicar.inbox.app import create_app

    settings = Settings.from_env()
    # The port is taken before anything else, and handed to the server: a port in use is
    # one line and exit 5 (as a busy data dir), not uvicorn's own error and exit 1.
    sock = listen(host, port)
    # Reached once here, so an unreachable server is one line and exit 4, not a startup
    # traceback from the server's event loop (which connects again: a client belongs to it).
    asyncio.run(_reachable(settings))
    web = create_app(settings, secure_cookies=secure_cookies)
    if not list_users(settings.data_dir):
        err.print(text("no inbox account yet: add one with `vicar inbox user add NAME`"))
    err.print(text(f"Vicar inbox on http://{host}:{port}/ (Ctrl-C stops it)"))
    if not _loopback(host) and not secure_cookies:
        err.print(text("warning: not on loopback: put TLS in front and pass --secure-cookies (docs/inbox.md)"))
    # The access log names paths only; sign-in tokens travel in a POST body or a URL fragment.
    config = uvicorn.Config(web, host=host, port=port, log_level="warning", proxy_headers=True)
    uvicorn.Server(config).run(sockets=[sock])


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


async def _reachable(settings: Settings) -> None:
    await open_client(settings)


@user_app.command("add")
@friendly
def user_add(
    name: str = typer.Argument(..., help="The responder's name: recorded with every answer they give here."),
    principal: list[str] = typer.Option(
        [],
        "--principal",
        help="Answer for this principal only (repeatable; default: every principal that lets NAME in).",
    ),
    url: Optional[str] = typer.Option(
        None, "--url", help="The inbox's address as people reach it (default: http://127.0.0.1:8765)."
    ),
) -> None:
    """Create an account, or give an existing one a new token (its old sessions end).
    Prints the personal sign-in link and token once: only their hash is kept. A principal
    lets NAME in when its allow-list names NAME or was opened with --anyone; one with no
    list lets in only its own name (docs/identity.md)."""
    from vicar.inbox.accounts import add_user
    from vicar.responders import load_policy

    settings = Settings.from_env()
    acct, token = add_user(settings.data_dir, name, principal)
    base = (url or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}").rstrip("/")
    sys.stdout.write(f"{base}/signin#token={token}\n")
    scope = ", ".join(acct.principals) or "every principal that lets it in"
    err.print(text(f"account {acct.name} ({scope}); token: {token}"))
    err.print(text("this is the only time the token is shown; `vicar inbox user add` again replaces it"))
    for p in acct.principals:  # said now, not found out at the first gate
        why = load_policy(settings.principals_dir, p).closed_refusal(p, acct.name)
        if why:
            err.print(text(f"note: {why}"))


@user_app.command("list")
@friendly
def user_list() -> None:
    """The accounts (names and principals; never tokens)."""
    from vicar.inbox.accounts import list_users

    for acct in list_users(Settings.from_env().data_dir):
        console.print(text(json.dumps({"name": acct.name, "principals": acct.principals})))


@user_app.command("remove")
@friendly
def user_remove(name: str = typer.Argument(...)) -> None:
    """Remove an account: its sessions end at their next request."""
    from vicar.inbox.accounts import remove_user

    remove_user(Settings.from_env().data_dir, name)
    console.print(text(f"removed inbox user {name}"))
