"""The command hook as a thin client of the inbox's endpoint: the standard library only, so
the process the agent starts for every tool call is up in tens of milliseconds (the full
`vicar` command takes over half a second to import: bench/HOOK_RESULTS.md).

    python -m vicar.hooks claude-code --url http://127.0.0.1:8765/hooks/claude-code \
        --token-file ~/.vicar/hook-tokens/alice
    python -m vicar.hooks codex --url http://127.0.0.1:8765/hooks/codex \
        --token-file ~/.vicar/hook-tokens/alice --timeout 150

Every failure (bad input, no token, the server unreachable, refusing, or silent past
--timeout) prints the agent's failure answer (Claude Code: `ask`; Codex: a deny), one line
on stderr, and exits with its code (protocol.py): never an allow. --timeout is the whole
wait, told to the server so it answers first; keep it below the agent's own `timeout`
(Codex runs the call when it stops a hook). `--check` opens nothing: it says which
principal the token opens gates for, exit 0, or why not, exit 4.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Any, BinaryIO, TextIO

from vicar.hooks import protocol as p

DEFAULT_TIMEOUT = {p.CLAUDE_CODE: 3600.0, p.CODEX: 110.0}  # Claude Code stops the hook at its own `timeout` first
MAX_REPLY_BYTES = 64 * 1024
USAGE = "usage: python -m vicar.hooks claude-code|codex --url URL --token-file PATH [--timeout SECONDS] [--check]"


def _options(argv: list[str]) -> dict[str, str]:
    if not argv or argv[0] not in p.AGENTS:
        raise p.BadInput(USAGE)
    opts: dict[str, str] = {"agent": argv[0]}
    rest = argv[1:]
    while rest:
        name = rest.pop(0)
        if name == "--check":
            opts["check"] = "1"
            continue
        if name not in ("--url", "--token-file", "--timeout") or not rest:
            raise p.BadInput(USAGE)
        opts[name[2:]] = rest.pop(0)
    if "url" not in opts or "token-file" not in opts:
        raise p.BadInput(USAGE)
    return opts


def _agent(argv: list[str]) -> str:
    return argv[0] if argv and argv[0] in p.AGENTS else p.CLAUDE_CODE


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
    """The endpoint answered with an HTTP error (a wrong token on --check: 401)."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


def ask_server(
    raw: bytes, url: str, token: str, timeout: float, method: str = "POST"
) -> tuple[dict[str, Any], int, str]:
    """(answer, failure kind as an exit code, problem) from the endpoint; a failure here
    is the caller's failure answer."""
    if url.startswith("https://"):
        status, headers, body = _https(raw, url, token, timeout, method)
    elif url.startswith("http://"):
        status, headers, body = _http(raw, url, token, timeout, method)
    else:
        raise ValueError(f"the hook URL must be http:// or https://, not {url[:60]!r}")
    if status != 200:
        raise Refused(status, body)
    answer = json.loads(body)
    if not isinstance(answer, dict):
        raise ValueError("the hook endpoint answered something other than a JSON object")
    code = headers.get(p.EXIT_HEADER.lower(), "0")
    exit_code = int(code) if code.isdigit() and int(code) != 2 else p.FAILED_EXIT
    return answer, exit_code, headers.get(p.PROBLEM_HEADER.lower(), "")


def _http(raw: bytes, url: str, token: str, timeout: float, method: str) -> tuple[int, dict[str, str], bytes]:
    """One request over a plain socket, all of it within `timeout` seconds. urllib and
    http.client import the email package, ssl and ipaddress: about 60 ms of the budget on
    this machine (bench/HOOK_RESULTS.md), for a request this simple (HTTP/1.1,
    Connection: close, the reply read to its end)."""
    deadline = time.monotonic() + timeout
    rest = url[len("http://") :]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.rpartition(":") if hostport.rsplit(":", 1)[-1].isdigit() else (hostport, "", "80")
    host = host.strip("[]")
    head = (
        f"{method} /{path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(raw)}\r\n"
        f"{p.WAIT_HEADER}: {timeout:g}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(head.encode("latin-1") + raw)
        chunks, size = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout:g} s")
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
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


def _https(raw: bytes, url: str, token: str, timeout: float, method: str) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url,
        data=raw if method == "POST" else None,
        method=method,
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            p.WAIT_HEADER: f"{timeout:g}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310  (the operator's URL)
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read(MAX_REPLY_BYTES)
    except urllib.error.HTTPError as exc:
        return exc.code, {}, exc.read(MAX_REPLY_BYTES)


def check(opts: dict[str, str], stdout: TextIO, stderr: TextIO) -> int:
    """`--check`: the principal the token opens gates for, asking the endpoint (GET)."""
    try:
        token = _token(opts["token-file"])
        body, _, _ = ask_server(b"", opts["url"], token, float(opts.get("timeout", 10)), "GET")
    except Refused as exc:
        try:
            why = json.loads(exc.body).get("error", "")
        except (ValueError, AttributeError):
            why = ""
        stderr.write(f"vicar hook: the hook endpoint refused the token: HTTP {exc.status} {why}".rstrip() + "\n")
        return p.UNREACHABLE_EXIT
    except (p.BadInput, OSError, ValueError) as exc:
        stderr.write(f"vicar hook: Vicar is unreachable at {opts['url']}: {exc}\n")
        return p.UNREACHABLE_EXIT
    stdout.write(json.dumps(body) + "\n")
    return 0


def run(argv: list[str], stdin: BinaryIO, stdout: TextIO, stderr: TextIO) -> int:
    agent = _agent(argv)
    try:
        opts = _options(argv)
    except p.BadInput as exc:
        raw = stdin.read(p.MAX_INPUT_BYTES + 1)
        return _fail(p.event_of(raw), agent, f"bad hook input: {exc}", p.BAD_INPUT_EXIT, stdout, stderr)
    if opts.get("check"):
        return check(opts, stdout, stderr)
    raw = stdin.read(p.MAX_INPUT_BYTES + 1)
    event = p.event_of(raw)
    try:
        p.parse(raw)  # refused here, in one line, even when the server is down
        token = _token(opts["token-file"])
        timeout = float(opts.get("timeout", DEFAULT_TIMEOUT[agent]))
        if not 0 < timeout < 10**6:
            raise ValueError(f"--timeout must be a number of seconds, not {opts.get('timeout')!r}")
    except (p.BadInput, ValueError) as exc:
        return _fail(event, agent, f"bad hook input: {exc}", p.BAD_INPUT_EXIT, stdout, stderr)
    try:
        body, code, problem = ask_server(raw, opts["url"], token, timeout)
    except Refused as exc:
        why = f"the hook endpoint refused the call: HTTP {exc.status}"
        return _fail(event, agent, why, p.UNREACHABLE_EXIT, stdout, stderr)
    except TimeoutError as exc:
        why = f"Vicar did not answer within {timeout:g} s ({exc})"
        return _fail(event, agent, why, p.UNREACHABLE_EXIT, stdout, stderr)
    except (OSError, ValueError) as exc:  # unreachable, a reset, a reply that is not JSON
        return _fail(event, agent, f"Vicar is unreachable: {exc}", p.UNREACHABLE_EXIT, stdout, stderr)
    stdout.write(json.dumps(p.for_agent(body, event, agent)))
    if problem:
        stderr.write(f"vicar hook: {problem}\n")
    return p.failure_exit(agent, code)


def _fail(event: str | None, agent: str, why: str, code: int, stdout: TextIO, stderr: TextIO) -> int:
    why = p.one_line(why, 500)
    then = "denied until it can decide" if agent == p.CODEX else "asking you here"
    stdout.write(json.dumps(p.ask(event, f"Vicar could not decide ({why}): {then}", agent)))
    stderr.write(f"vicar hook: {why}\n")
    return p.failure_exit(agent, code)


def main() -> None:
    agent = _agent(sys.argv[1:])
    try:
        code = run(sys.argv[1:], sys.stdin.buffer, sys.stdout, sys.stderr)
    except Exception as exc:  # noqa: BLE001  (a crash still answers the failure answer, in one line)
        code = _fail(None, agent, f"unexpected {type(exc).__name__}: {exc}", p.FAILED_EXIT, sys.stdout, sys.stderr)
    sys.stdout.flush()
    sys.exit(code)
