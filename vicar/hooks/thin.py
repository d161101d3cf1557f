"""The command hook as a thin client of the inbox's endpoint: the standard library only, so
the process Claude Code starts for every tool call is up in tens of milliseconds (the full
`vicar` command takes over half a second to import: bench/HOOK_RESULTS.md).

    python -m vicar.hooks claude-code --url http://127.0.0.1:8765/hooks/claude-code \
        --token-file ~/.vicar/hook-token

Every failure (bad input, no token, the server unreachable or refusing) prints the
event's `ask`, one line on stderr, and exits with its code (protocol.py): never `allow`.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any, BinaryIO, TextIO

from vicar.hooks import protocol as p

DEFAULT_TIMEOUT = 3600.0  # Claude Code stops the hook at its own `timeout` first
MAX_REPLY_BYTES = 64 * 1024
USAGE = "usage: python -m vicar.hooks claude-code --url URL --token-file PATH [--timeout SECONDS]"


def _options(argv: list[str]) -> dict[str, str]:
    if not argv or argv[0] != "claude-code":
        raise p.BadInput(USAGE)
    opts: dict[str, str] = {}
    rest = argv[1:]
    while rest:
        name = rest.pop(0)
        if name not in ("--url", "--token-file", "--timeout") or not rest:
            raise p.BadInput(USAGE)
        opts[name[2:]] = rest.pop(0)
    if "url" not in opts or "token-file" not in opts:
        raise p.BadInput(USAGE)
    return opts


def _token(path: str) -> str:
    import os.path

    file = os.path.expanduser(path)
    try:
        with open(file, "rb") as f:
            token = f.read(4096).decode().strip()
    except (OSError, UnicodeError) as exc:
        raise p.BadInput(f"cannot read the hook token at {file}: {exc.__class__.__name__}") from None
    if not token:
        raise p.BadInput(f"the hook token file {file} is empty")
    return token


class Refused(OSError):
    """The endpoint answered with an HTTP error (a wrong token: 401)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def ask_server(raw: bytes, url: str, token: str, timeout: float) -> tuple[dict[str, Any], int, str]:
    """(answer, exit code, problem) from the endpoint; a failure here is the caller's ask."""
    if url.startswith("https://"):
        status, headers, body = _https(raw, url, token, timeout)
    elif url.startswith("http://"):
        status, headers, body = _http(raw, url, token, timeout)
    else:
        raise ValueError(f"the hook URL must be http:// or https://, not {url[:60]!r}")
    if status != 200:
        raise Refused(status)
    answer = json.loads(body)
    if not isinstance(answer, dict):
        raise ValueError("the hook endpoint answered something other than a JSON object")
    code = headers.get(p.EXIT_HEADER.lower(), "0")
    exit_code = int(code) if code.isdigit() and int(code) != 2 else p.FAILED_EXIT
    return answer, exit_code, headers.get(p.PROBLEM_HEADER.lower(), "")


def _http(raw: bytes, url: str, token: str, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """One POST over a plain socket. urllib and http.client import the email package, ssl
    and ipaddress: about 60 ms of the budget on this machine (bench/HOOK_RESULTS.md), for
    a request this simple (HTTP/1.1, Connection: close, the reply read to its end)."""
    rest = url[len("http://") :]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.rpartition(":") if hostport.rsplit(":", 1)[-1].isdigit() else (hostport, "", "80")
    host = host.strip("[]")
    head = (
        f"POST /{path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(raw)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(head.encode("latin-1") + raw)
        chunks, size = [], 0
        while chunk := conn.recv(65536):
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise ValueError("the hook endpoint's reply is too long")
            chunks.append(chunk)
    reply = b"".join(chunks)
    header, sep, body = reply.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    if not sep or not lines[0].startswith("HTTP/1."):
        raise ValueError("the hook endpoint's reply is not HTTP")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if "chunked" in headers.get("transfer-encoding", ""):
        raise ValueError("the hook endpoint's reply is chunked")
    return status, headers, body


def _https(raw: bytes, url: str, token: str, timeout: float) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url, data=raw, method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310  (the operator's URL)
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read(MAX_REPLY_BYTES)
    except urllib.error.HTTPError as exc:
        return exc.code, {}, b""


def run(argv: list[str], stdin: BinaryIO, stdout: TextIO, stderr: TextIO) -> int:
    raw = stdin.read(p.MAX_INPUT_BYTES + 1)
    event = p.event_of(raw)
    try:
        opts = _options(argv)
        p.parse(raw)  # refused here, in one line, even when the server is down
        token = _token(opts["token-file"])
        timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
    except (p.BadInput, ValueError) as exc:
        return _fail(event, f"bad hook input: {exc}", p.BAD_INPUT_EXIT, stdout, stderr)
    try:
        body, code, problem = ask_server(raw, opts["url"], token, timeout)
    except Refused as exc:
        return _fail(
            event, f"the hook endpoint refused the call: HTTP {exc.status}", p.UNREACHABLE_EXIT, stdout, stderr
        )
    except (OSError, ValueError) as exc:  # unreachable, a timeout, a reset, a reply that is not JSON
        return _fail(event, f"Vicar is unreachable: {exc}", p.UNREACHABLE_EXIT, stdout, stderr)
    stdout.write(json.dumps(body))
    if problem:
        stderr.write(f"vicar hook: {problem}\n")
    return code


def _fail(event: str | None, why: str, code: int, stdout: TextIO, stderr: TextIO) -> int:
    why = " ".join(why.split())[:500]
    stdout.write(json.dumps(p.ask(event, f"Vicar could not decide ({why}): asking you here")))
    stderr.write(f"vicar hook: {why}\n")
    return code


def main() -> None:
    try:
        code = run(sys.argv[1:], sys.stdin.buffer, sys.stdout, sys.stderr)
    except Exception as exc:  # noqa: BLE001  (a crash still answers ask, in one line)
        code = _fail(None, f"unexpected {type(exc).__name__}: {exc}", p.FAILED_EXIT, sys.stdout, sys.stderr)
    sys.stdout.flush()
    sys.exit(code)
