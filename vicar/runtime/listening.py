"""Taking a TCP port for a server (the inbox, the demo's inbox, the codec server): one
home for what a refusal says, so a busy port is Conflict (exit 5) everywhere and a host
or port this machine refuses is InvalidInput (exit 2)."""

from __future__ import annotations

import errno
import socket

from vicar.errors import Conflict, InvalidInput, VicarError


def bind_error(exc: OSError, host: str, port: int, option: str = "--port") -> VicarError:
    """The one line for a failed bind; `option` is the flag that picks another port."""
    if isinstance(exc, socket.gaierror) or exc.errno != errno.EADDRINUSE:
        return InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    return Conflict(f"port {port} on {host} is in use by another process: stop it or pass another {option}")


def listen(host: str, port: int, option: str = "--port") -> socket.socket:
    """A listening socket on host:port (0: a free one), or bind_error's one line."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:  # socket.gaierror is one too
        raise bind_error(exc, host, port, option) from None
