"""The long-running processes: `vicar codec-server` and `vicar worker`."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer

from vicar.cli.base import app, console, friendly
from vicar.display import text
from vicar.settings import Settings


@app.command("codec-server")
@friendly
def codec_server(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback: only this machine)."),
    port: int = typer.Option(8081, help="Port (0: any free one, printed)."),
    origin: Optional[list[str]] = typer.Option(
        None, help="A Temporal UI origin allowed by CORS (repeatable; default the embedded UI's)."
    ),
) -> None:
    """Serve Temporal's codec protocol so the Web UI and `temporal` CLI show sealed payloads (docs/codec.md)."""
    from vicar.runtime.codec_server import run

    run(Settings.from_env(), host, port, origin or [], lambda line: console.print(text(line)))


@app.command()
@friendly
def worker(
    shards: Optional[str] = typer.Option(
        None,
        "--shards",
        envvar="VICAR_SHARDS",
        help="With VICAR_SHARD_COUNT set: the shards whose memories this worker holds: 'all' (default), "
        "'0-3', '0,2,5', or 'pod:R' (a StatefulSet pod of R replicas, by its hostname's ordinal).",
    ),
) -> None:
    """Run the worker (starts the embedded Temporal server unless TEMPORAL_ADDRESS is set)."""
    from vicar.worker import configure_logging, serve

    configure_logging()
    settings = Settings.from_env()
    if shards is not None:
        settings.shards = shards
    served = settings.served_shards()  # a bad spec: one line, before anything starts

    def ready(client, server) -> None:
        target = server.address if server else client.service_client.config.target_host
        console.print(f"Worker ready on {target}" + (f"; UI at {server.ui_url}" if server else ""))
        if server and not server.started_here:
            console.print(f"(the embedded server was started by another Vicar process, pid {server.started_by})")

        if served:
            console.print(f"Serving shards {', '.join(map(str, served))} of {settings.shard_count}")

    asyncio.run(serve(settings, on_ready=ready, command="vicar worker"))
