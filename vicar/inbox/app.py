"""The inbox's Starlette app: routes, signed session cookies naming a session kept on
the server (vicar.inbox.sessions: signing out ends it), sign-in by a personal token (a
link whose token rides in the URL fragment, so no server log ever holds it, or the
token pasted), rate-limited per client address and per account, the security headers
on every response, and every failure as one line on a page (or in the server's log)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from vicar.errors import VicarError
from vicar.hooks.http import hook_check, hook_endpoint
from vicar.inbox import answering, gate_pages, oversight_pages
from vicar.inbox.accounts import session_secret, user_for_token
from vicar.inbox.sessions import SESSION_DAYS, close_session, open_session
from vicar.inbox.slack_actions import interaction as slack_interaction
from vicar.inbox.web import (
    HERE,
    SECURITY_HEADERS,
    SIGNIN_ACCOUNT,
    SIGNIN_ADDRESS,
    Inbox,
    account,
    checked_form,
    error_page,
    inbox,
    one,
    redirect,
    render,
    temporal_blip,
    vicar_error,
)
from vicar.settings import Settings

SESSION_COOKIE = "vicar_inbox"
log = logging.getLogger("uvicorn.error")  # the server's own log: what its terminal shows


async def signin_page(request: Request) -> Response:
    return render(request, "signin.html")


def _address(request: Request) -> str:
    # Behind the reverse proxy uvicorn trusts, the client's address from X-Forwarded-For.
    return request.client.host if request.client else "?"


def _too_many(request: Request, seconds: int, why: str) -> Response:
    page = render(request, "signin.html", status=429, limited=why)
    page.headers["Retry-After"] = str(seconds)
    return page


async def signin(request: Request) -> Response:
    state = inbox(request)
    form = await checked_form(request)
    address = _address(request)
    wait = state.signin_address.retry_after(address)
    if wait is not None:  # refused before the token is even looked at: nothing is learnt
        return _too_many(request, wait, "Too many sign-in attempts from your address")
    acct = user_for_token(state.settings.data_dir, one(form, "token"))
    if acct is None:
        state.signin_address.spend(address)
        if state.signin_address.retry_after(address) is not None:
            log.warning("inbox: sign-in from %s refused for a while: too many wrong tokens", address)
        return render(request, "signin.html", status=403, failed=True)
    wait = state.signin_account.retry_after(acct.name)
    if wait is not None:
        log.warning("inbox: sign-in to %s refused for a while: too many sign-ins", acct.name)
        return _too_many(request, wait, "Too many sign-in attempts into this account")
    state.signin_account.spend(acct.name)
    request.session.clear()  # a new session on sign-in: nothing carried over from before
    sid = open_session(state.settings.data_dir, acct.name)
    request.session.update(user=acct.name, key=acct.session_key, sid=sid)
    return redirect("/")


async def signout(request: Request) -> Response:
    await checked_form(request)
    name, sid = request.session.get("user"), request.session.get("sid")
    if isinstance(name, str) and isinstance(sid, str):
        close_session(inbox(request).settings.data_dir, name, sid)  # a copy of the cookie opens nothing now
    request.session.clear()
    return redirect("/signin")


async def home(request: Request) -> Response:
    return await gate_pages.waiting_list(request)


async def client_gone(request: Request, exc: Exception) -> Response:
    """The client hung up before its form arrived (a phone losing its network): one line
    in the server's log; the response goes nowhere."""
    log.warning(
        "inbox: %s went away before its form arrived: %s %s", _address(request), request.method, request.url.path
    )
    return Response(status_code=400)


class SecurityHeaders:
    """The pages' security headers on every response, the static files' and the router's
    own (404, 405) too; a response that sets one keeps its own."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, sending)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code in (301, 302, 303, 307) and exc.headers:
        return redirect(exc.headers["Location"])
    return error_page(request, str(exc.detail), exc.status_code)


async def favicon(request: Request) -> Response:
    # Browsers ask for /favicon.ico whatever the page links: the same icon, not a 404.
    return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")


def create_app(
    settings: Settings, client: Any = None, *, secure_cookies: bool = False, undo_seconds: float = 10.0
) -> Starlette:
    """The inbox for this deployment; `client` a connected Temporal client (else one is
    connected at startup from the settings, as the CLI connects). Every answer is held
    `undo_seconds` before it is sent (vicar.inbox.held)."""
    state = Inbox(settings=settings, client=client, undo_seconds=undo_seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if state.client is None:
            from vicar.runtime.connect import connect

            state.client = await connect(settings)
        sending = asyncio.ensure_future(answering.sender(state))
        try:
            yield
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending

    routes = [
        Route("/", home),
        Route("/signin", signin_page),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]),
        Route("/gates/{workflow_id:path}", gate_pages.gate_page),
        Route("/gates-next", gate_pages.step),
        Route("/answer", answering.answer, methods=["POST"]),
        Route("/undo", answering.undo, methods=["POST"]),
        Route("/batch", answering.batch_confirm, methods=["POST"]),
        Route("/batch/approve", answering.batch_approve, methods=["POST"]),
        Route("/favicon.ico", favicon),
        Route("/feed", oversight_pages.feed),
        Route("/review", oversight_pages.review, methods=["POST"]),
        Route("/rules", oversight_pages.rules),
        Route("/control", oversight_pages.control, methods=["POST"]),
        Route("/health", oversight_pages.health),
        # Coding agents' hooks (vicar/hooks): /hooks/claude-code, /hooks/codex, each also /<principal>.
        Route("/hooks/{agent}", hook_endpoint, methods=["POST"]),
        Route("/hooks/{agent}", hook_check, methods=["GET"]),
        Route("/hooks/{agent}/{principal}", hook_endpoint, methods=["POST"]),
        Route("/hooks/{agent}/{principal}", hook_check, methods=["GET"]),
        Route("/slack/actions", slack_interaction, methods=["POST"]),  # Slack's buttons (docs/slack.md)
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(
            SessionMiddleware,
            secret_key=session_secret(settings.data_dir),
            session_cookie=SESSION_COOKIE,
            max_age=SESSION_DAYS * 86400,
            # A link from chat is a cross-site GET: it must carry the session (not "strict").
            same_site="lax",
            https_only=secure_cookies,
        ),
    ]
    from temporalio.service import RPCError

    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: http_error,
            VicarError: vicar_error,
            # Its own entry, not the catch-all's: Starlette re-raises what the catch-all
            # handled (a traceback in the terminal) and a moment's RPC error is one line.
            RPCError: temporal_blip,
            ClientDisconnect: client_gone,
            Exception: _unexpected,
        },
    )
    app.state.inbox = state
    return app


async def _unexpected(request: Request, exc: Exception) -> Response:
    from temporalio.service import RPCError

    if isinstance(exc, RPCError):
        return temporal_blip(request, exc)
    return error_page(request, f"unexpected {type(exc).__name__}: the server's log has the details", 500)


__all__ = ["create_app", "account", "SIGNIN_ACCOUNT", "SIGNIN_ADDRESS"]
