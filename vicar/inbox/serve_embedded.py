"""The inbox served inside another command's event loop (`vicar demo --keep`): the same
app `vicar inbox` serves, on a socket the caller took first, stopped with the caller."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

from vicar.settings import Settings


@contextlib.asynccontextmanager
async def serving(settings: Settings, client: Any, sock: socket.socket) -> AsyncIterator[str]:
    """Serve the inbox on `sock` until the block ends; yields its base address."""
    import uvicorn

    from vicar.inbox.app import create_app

    class Embedded(uvicorn.Server):
        # The caller owns Ctrl-C (it stops the worker and the server too): uvicorn must
        # not take the signal handlers, nor raise the signal again when it stops.
        @contextlib.contextmanager
        def capture_signals(self):
            yield

    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        create_app(settings, client), log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = Embedded(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task  # its error, not a wait forever
                raise RuntimeError("the inbox stopped before it served")
            await asyncio.sleep(0.02)
        yield f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
