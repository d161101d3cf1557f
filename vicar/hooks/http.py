"""The inbox server's hook endpoint, `POST /hooks/claude-code`: Claude Code's HTTP hook
(or the thin command, vicar/hooks/thin.py) sends the hook input, with the hook token as
a bearer token, and gets the hook's JSON back.

A request without the token opens nothing: 401 (an HTTP hook's non-2xx is a non-blocking
error, so the agent's own permission flow goes on: never an allow). After that every
answer is 200 with the hook's JSON, `ask` on any failure, and the failure's exit code
and line in the X-Vicar-Hook-Exit / X-Vicar-Hook-Problem headers, which the thin command
turns back into its exit code and stderr line."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vicar.hooks import protocol as p
from vicar.hooks.decide import HookAnswer, answer_call, failure, fallback
from vicar.settings import ReadAtUse, Settings, secret

TOKEN_VAR, TOKEN_FILE = "VICAR_HOOK_TOKEN", "hook-token"
MIN_TOKEN_CHARS = 16


def hook_token(settings: Settings) -> tuple[str, Path | None]:
    """(token, the file it is in, if any): VICAR_HOOK_TOKEN, else `<data dir>/hook-token`,
    made 0600 on first use (the thin command reads that file; an HTTP hook's settings.json
    names it through an environment variable)."""
    from vicar.errors import InvalidInput

    raw = secret(ReadAtUse().hook_token)
    if raw:
        if len(raw) < MIN_TOKEN_CHARS:
            raise InvalidInput(f"{TOKEN_VAR} must have at least {MIN_TOKEN_CHARS} characters")
        return raw, None
    path = settings.data_dir / TOKEN_FILE
    if not path.exists():
        # Written aside, then linked: a half-written token is never read, and the first
        # of two processes wins.
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    token = path.read_text().strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"{path}: the hook token must have at least {MIN_TOKEN_CHARS} characters")
    return token, path


def _authorized(request: Request, settings: Settings) -> bool:
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return False
    expected, _ = hook_token(settings)
    return hmac.compare_digest(value.strip().encode(), expected.encode())


def _reply(answer: HookAnswer) -> Response:
    headers = {}
    if answer.exit_code:
        headers = {
            p.EXIT_HEADER: str(answer.exit_code),
            # One line of ASCII: a header cannot carry a newline (the line may quote the input).
            p.PROBLEM_HEADER: " ".join(answer.problem.split()).encode("ascii", "replace")[:500].decode(),
        }
    return JSONResponse(answer.body, headers=headers)


async def _body(request: Request) -> bytes:
    """The body, read no further than the protocol's bound (declared or not)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > p.MAX_INPUT_BYTES:
        raise p.BadInput(f"the hook input is over {p.MAX_INPUT_BYTES // 1024 // 1024} MiB")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > p.MAX_INPUT_BYTES:
            raise p.BadInput(f"the hook input is over {p.MAX_INPUT_BYTES // 1024 // 1024} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


async def claude_code_hook(request: Request) -> Response:
    from vicar.inbox.web import client_as, inbox

    state = inbox(request)
    settings = state.settings
    if not _authorized(request, settings):
        return JSONResponse(
            {"error": "the hook endpoint needs its bearer token (docs/claude-code.md)"}, status_code=401
        )
    raw = b""
    try:
        raw = await _body(request)
        call = p.parse(raw)
    except p.BadInput as exc:
        return _reply(failure(p.event_of(raw), exc))
    if state.client is None:
        return _reply(fallback(call["hook_event_name"], "the inbox has no Temporal client", p.UNREACHABLE_EXIT))
    observer = None
    if call["hook_event_name"] == p.POST_TOOL_USE and settings.hook.principal:
        # The observed answer is the principal's: it goes in their name (docs/identity.md).
        observer = await client_as(state, settings.hook.principal)
    return _reply(await answer_call(state.client, settings, call, observer))
