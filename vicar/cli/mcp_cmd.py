"""`vicar mcp`: an MCP server whose tools ask the person (docs/mcp.md)."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer

from vicar.cli.base import app, err, friendly, open_client
from vicar.display import text
from vicar.errors import InvalidInput, NotInstalled
from vicar.models import check_principal
from vicar.settings import Settings


@app.command()
@friendly
def mcp(
    principal: str = typer.Option(..., "--principal", help="The person the tools ask (an agent asks no one else)."),
    http: Optional[str] = typer.Option(
        None, "--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp (loopback only)."
    ),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the client's mcpServers entry (full paths, the env it needs) and exit."
    ),
) -> None:
    """Serve MCP tools that ask PRINCIPAL through Vicar: ask_approval (a gate), ask_question
    (an agent's question) and gate_status (poll one). Over stdio unless --http."""
    if print_config:
        import json
        import sys

        check_principal(principal)
        sys.stdout.write(json.dumps({"mcpServers": {"vicar": client_entry(principal)}}, indent=2) + "\n")
        return
    try:
        from vicar.mcp_server.server import serve_http, serve_stdio
    except ImportError:
        raise NotInstalled("vicar mcp needs the MCP SDK: pip install 'vicar[mcp]'") from None
    try:
        check_principal(principal)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    settings = Settings.from_env()
    address = _loopback_address(http) if http else None

    async def run() -> None:
        client = await open_client(settings)  # unreachable: one line and exit 4, before serving
        if address is None:
            await serve_stdio(client, settings, principal)
        else:
            err.print(text(f"Vicar MCP for {principal} on http://{address[0]}:{address[1]}/mcp (Ctrl-C stops it)"))
            await serve_http(client, settings, principal, *address)

    asyncio.run(run())


def _loopback_address(value: str) -> tuple[str, int]:
    """HOST:PORT on loopback: the HTTP transport has no sign-in of its own, so anyone who
    reached it could open gates in the principal's name."""
    import ipaddress

    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        number = int(port)
    except ValueError:
        raise InvalidInput(f"--http {value[:80]!r}: expected HOST:PORT on loopback, e.g. 127.0.0.1:8766") from None
    if not loopback or not 0 < number < 65536:
        raise InvalidInput(f"--http {value[:80]!r}: only a loopback address and a port 1-65535 (no sign-in here)")
    return host, number


# What a stdio client must pass: the MCP SDK's client gives the server only a few of its
# own variables (HOME, PATH, ...), so without these a server on another data dir finds no
# payload keys and exits, and the client says only "Connection closed". (VICAR_CODEC_KEYS,
# a secret, is never printed: the keys are read from the data dir, docs/codec.md.) The data
# dir and task queue come from the settings; Temporal's address and namespace as set.


def client_entry(principal: str) -> dict:
    """The client's entry for this server: the full path of this install's `vicar` (or
    this Python with -m vicar.cli), and the environment this shell gives Vicar."""
    import os
    import shutil
    import sys
    from pathlib import Path

    beside = Path(sys.executable).parent / "vicar"
    if beside.is_file() and os.access(beside, os.X_OK):
        command, args = str(beside), ["mcp", "--principal", principal]
    elif found := shutil.which("vicar"):
        command, args = os.path.abspath(found), ["mcp", "--principal", principal]
    else:
        command, args = sys.executable, ["-m", "vicar.cli", "mcp", "--principal", principal]
    settings = Settings.from_env()
    env = {"VICAR_DATA_DIR": str(settings.data_dir.absolute()), "VICAR_TASK_QUEUE": settings.task_queue}
    # Temporal's own variables (its envconfig reads them, not Vicar's settings).
    temporal = {
        "TEMPORAL_ADDRESS": os.environ.get("TEMPORAL_ADDRESS"),
        "TEMPORAL_NAMESPACE": os.environ.get("TEMPORAL_NAMESPACE"),
    }
    env |= {name: value for name, value in temporal.items() if value}
    return {"command": command, "args": args, "env": env}
