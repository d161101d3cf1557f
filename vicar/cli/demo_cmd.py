"""`vicar demo`: a scripted session on an embedded server."""

from __future__ import annotations

import asyncio
import sys
from typing import Optional

import typer

from vicar.cli.base import app, console, friendly
from vicar.display import text
from vicar.memory.names import child_path
from vicar.settings import Settings


@app.command()
@friendly
def demo(
    principal: Optional[str] = typer.Option(
        None, help="Principal name (default: alice, or alice-2, alice-3... when an earlier demo's memory has the name)."
    ),
    gates: int = typer.Option(60, min=1, max=500, help="How many gates to open."),
    human_delay: float = typer.Option(0.2, min=0.0, help="Seconds the scripted human takes to answer."),
    keep: bool = typer.Option(
        False,
        "--keep",
        help="Then leave a few gates waiting for you, and the inbox (to answer them), the worker, "
        "the embedded server and its UI up, until Ctrl-C.",
    ),
    inbox_port: Optional[int] = typer.Option(
        None, "--inbox-port", min=1, max=65535, help="With --keep: the inbox's port on 127.0.0.1 (default: a free one)."
    ),
) -> None:
    """Run a scripted session: gates open, the proxy learns from the human's answers."""
    from vicar.demo import claim_principal
    from vicar.errors import InvalidInput
    from vicar.models import check_principal

    if inbox_port is not None and not keep:
        raise InvalidInput("--inbox-port serves the inbox of `vicar demo --keep`: add --keep")
    settings = Settings.from_env()
    # The inbox's port is taken before anything starts: a port in use is one line (exit 5)
    # now, not after the whole session.
    sock = None
    if keep:
        from vicar.demo.inbox import INBOX_HOST
        from vicar.runtime.listening import listen

        sock = listen(INBOX_HOST, inbox_port or 0, "--inbox-port")
    principal, said = claim_principal(
        settings.principals_dir, None if principal is None else check_principal(principal)
    )
    asyncio.run(_demo(settings, principal, gates, human_delay, keep, said, sock))


async def _demo(
    settings: Settings,
    principal: str,
    gates: int,
    human_delay: float,
    keep: bool = False,
    said: str = "",
    sock=None,
) -> None:
    from vicar.demo import demo_autonomy, demo_task_queue, render_summary, run_demo
    from vicar.memory.embedder import make_embedder
    from vicar.runtime.locks import WorkerLock
    from vicar.worker import build_worker, temporal_client

    console.print(text(f"Data directory: {settings.data_dir}"))
    if said:
        console.print(text(said))
    console.print(text(demo_autonomy(child_path(settings.principals_dir, principal))))
    # Its own task queue, so a demo runs next to `vicar worker` and other demos; locked
    # before the server, so a clash starts nothing.
    task_queue = demo_task_queue(principal)
    owner = WorkerLock(settings.data_dir, task_queue, "vicar demo")
    with console.status("Starting Temporal (embedded dev server) …"):
        ctx = temporal_client(settings)
        client, server = await ctx.__aenter__()
    try:
        where = (
            f"embedded server at {server.address}"
            if server
            else f"Temporal at {client.service_client.config.target_host}"
        )
        console.print(text(f"Connected to {where}."))
        if server and not server.started_here:
            console.print(
                f"It was started by another Vicar process (pid {server.started_by}) "
                "and stays up after this demo while any other Vicar process uses it."
            )
        with console.status("Loading the embedding model (all-MiniLM-L6-v2, local) …"):
            await asyncio.to_thread(make_embedder, params=settings.embedder)
        # Unsharded whatever the deployment: the demo's own queue and memory, in this process.
        worker, registry = build_worker(
            client, settings.model_copy(update={"shard_count": None}), task_queue=task_queue
        )
        try:
            async with worker:
                summary = await run_demo(
                    client, principal, gates, worker.task_queue, registry, console, human_delay, settings
                )
                # A link only while it works: without --keep the server goes with the demo.
                render_summary(summary, console, principal)
                if keep:
                    await _keep(settings, client, server, principal, worker.task_queue, sock)
        finally:
            registry.close()
        if server and not keep:
            console.print(
                "The embedded server stops now unless another Vicar process still uses it; "
                "`vicar demo --keep` keeps it, a worker and the Temporal UI up until Ctrl-C."
            )
    finally:
        await ctx.__aexit__(*sys.exc_info())
        owner.release()
        if sock is not None:
            sock.close()


async def _keep(settings: Settings, client, server, principal: str, task_queue: str, sock) -> None:
    """Gates left for the person, the inbox to answer them in, and everything up until
    Ctrl-C (the worker too: the gates and the UI's queries need one)."""
    from vicar.demo.inbox import demo_account, open_waiting
    from vicar.inbox.serve_embedded import serving
    from vicar.worker import stop_on_signals

    with console.status("Opening gates that wait for you …"):
        waiting = await open_waiting(client, principal, task_queue)
    token = demo_account(settings.data_dir, principal)
    # The inbox's feed and health run on the worker's queue: the demo's own.
    async with serving(settings.model_copy(update={"task_queue": task_queue}), client, sock) as base:
        console.print(text(f"{len(waiting)} gates wait for you ({principal}): answer them in the inbox.", "bold"))
        console.print(text(f"Inbox: {base}/"))
        # Printed once: only the token's hash is kept (docs/inbox.md).
        console.print(text(f"Sign in as {principal}: {base}/signin#token={token}"))
        if server:
            console.print(
                text(
                    f"--keep: the server and the UI stay up at {server.ui_url}/namespaces/default/workflows "
                    "until Ctrl-C."
                )
            )
        else:
            console.print(text("--keep: the inbox and the worker stay up until Ctrl-C."))
        with stop_on_signals() as stop:
            await stop.wait()
        console.print(
            "Stopping the inbox, the worker and the embedded server (unless another Vicar process still uses it)."
        )
