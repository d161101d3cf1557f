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
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from vicar.hooks import protocol as p

EXIT_HEADER, PROBLEM_HEADER = "X-Vicar-Hook-Exit", "X-Vicar-Hook-Problem"  # vicar/hooks/http.py's
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
    file = Path(path).expanduser()
    try:
        with open(file, "rb") as f:
            token = f.read(4096).decode().strip()
    except (OSError, UnicodeError) as exc:
        raise p.BadInput(f"cannot read the hook token at {file}: {exc.__class__.__name__}") from None
    if not token:
        raise p.BadInput(f"the hook token file {file} is empty")
    return token


def ask_server(raw: bytes, url: str, token: str, timeout: float) -> tuple[dict[str, Any], int, str]:
    """(answer, exit code, problem) from the endpoint; a failure here is the caller's ask."""
    request = urllib.request.Request(
        url, data=raw, method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310  (the operator's URL)
        body = json.loads(reply.read(MAX_REPLY_BYTES + 1)[:MAX_REPLY_BYTES])
        code = reply.headers.get(EXIT_HEADER, "0")
        problem = reply.headers.get(PROBLEM_HEADER, "")
    if not isinstance(body, dict):
        raise ValueError("the hook endpoint answered something other than a JSON object")
    exit_code = int(code) if code.isdigit() and int(code) not in (2,) else p.FAILED_EXIT
    return body, exit_code, problem


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
    except urllib.error.HTTPError as exc:
        return _fail(event, f"the hook endpoint refused the call: HTTP {exc.code}", p.UNREACHABLE_EXIT, stdout, stderr)
    except (OSError, ValueError) as exc:  # URLError, a timeout, a reset, a reply that is not JSON
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
