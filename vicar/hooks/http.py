"""The inbox server's hook endpoints: `POST /hooks/claude-code` and `POST /hooks/codex`
(optionally `/hooks/<agent>/<principal>`). The agent's hook (Claude Code's HTTP hook, or
the thin command, vicar/hooks/thin.py) sends the hook input with a hook token as a bearer
token and gets the hook's JSON back, in the agent's own protocol (protocol.py).

The token chooses the principal (vicar/hooks/tokens.py); a principal named in the URL must
be the token's. A request whose token opens nothing opens nothing, and is answered with
the agent's failure answer (Claude Code: `ask`, saying the token was refused; Codex: a
deny), with status 200: Claude Code shows nothing of a non-2xx answer and goes on with its
own flow silently, so a wrong token would go unseen. Every answer carries the failure's
exit code and line in the X-Vicar-Hook-Exit / X-Vicar-Hook-Problem headers, which the
thin command turns back into its exit code and stderr line.

`GET /hooks/<agent>` with a token answers which principal it opens gates for (401 if
none): what `vicar hook install` and `python -m vicar.hooks <agent> --check` verify."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vicar.hooks import protocol as p
from vicar.hooks.decide import HookAnswer, answer_call, failure, fallback
from vicar.hooks.tokens import MIN_TOKEN_CHARS, TOKEN_VAR, hook_token, principal_for

__all__ = ["MIN_TOKEN_CHARS", "TOKEN_VAR", "hook_endpoint", "hook_check", "hook_token"]

REFUSED = "the hook token was refused (vicar hook install, or vicar hook token --principal P, gives one)"


def _bearer(request: Request) -> str:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


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


def _agent(request: Request) -> str:
    agent = request.path_params.get("agent", p.CLAUDE_CODE)
    return agent if agent in p.AGENTS else p.CLAUDE_CODE


def _principal(request: Request) -> tuple[str | None, str]:
    """(the principal the request's token opens gates for, why not)."""
    from vicar.inbox.web import inbox

    settings = inbox(request).settings
    known, principal = principal_for(settings, _bearer(request))
    if not known:
        return None, REFUSED
    named = request.path_params.get("principal")
    if named is not None and named != principal:
        return None, f"the hook token is not {named[:64]!r}'s"
    if principal is None:
        return None, "the hook token has no principal: set VICAR_HOOK_PRINCIPAL, or use a principal's own token"
    return principal, ""


def _wait(request: Request) -> float | None:
    """How long the hook's own process waits (the thin command's --timeout), less the time
    to answer: the gate's wait must end first, or the agent stops the hook itself."""
    given = request.headers.get(p.WAIT_HEADER, "")
    try:
        seconds = float(given)
    except ValueError:
        return None
    if not 0 < seconds < 10**6:
        return None
    return max(0.0, seconds - 2.0)


async def hook_endpoint(request: Request) -> Response:
    from vicar.inbox.web import inbox

    state = inbox(request)
    if request.path_params.get("agent", p.CLAUDE_CODE) not in p.AGENTS:
        return JSONResponse({"error": f"no hook for {request.path_params['agent'][:40]!r}"}, status_code=404)
    agent = _agent(request)
    principal, why = _principal(request)
    raw = b""
    try:
        raw = await _body(request)
        call = p.parse(raw)
    except p.BadInput as exc:
        event = p.event_of(raw)
        if principal is None:  # nothing about the input is told to a caller without a token
            return _reply(fallback(event, why, p.UNREACHABLE_EXIT, agent))
        return _reply(failure(event, exc, agent))
    event = call["hook_event_name"]
    if principal is None:
        return _reply(fallback(event, why, p.UNREACHABLE_EXIT, agent))
    if state.client is None:
        return _reply(fallback(event, "the inbox has no Temporal client", p.UNREACHABLE_EXIT, agent))
    answer = await answer_call(
        state.client, state.settings, call, principal=principal, agent=agent, wait_seconds=_wait(request)
    )
    return _reply(answer)


async def hook_check(request: Request) -> Response:
    """Which principal this token opens gates for, opening nothing."""
    if request.path_params.get("agent", p.CLAUDE_CODE) not in p.AGENTS:
        return JSONResponse({"error": "no such hook"}, status_code=404)
    principal, why = _principal(request)
    if principal is None:
        return JSONResponse({"error": why}, status_code=401)
    return JSONResponse({"principal": principal, "agent": _agent(request)})


# The first version's name for the endpoint (Claude Code's).
claude_code_hook = hook_endpoint
