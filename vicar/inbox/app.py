"""The inbox's Starlette app: routes, signed session cookies, sign-in by a personal
token (a link whose token rides in the URL fragment, so no server log ever holds it,
or the token pasted), and every failure as one line on a page."""

from __future__ import annotations

import contextlib
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from vicar.config import Settings
from vicar.errors import VicarError
from vicar.inbox import gate_pages, oversight_pages
from vicar.inbox.accounts import session_secret, user_for_token
from vicar.inbox.web import HERE, Inbox, account, checked_form, error_page, inbox, one, redirect, render, vicar_error

SESSION_COOKIE = "vicar_inbox"
SESSION_DAYS = 14


async def signin_page(request: Request) -> Response:
    return render(request, "signin.html")


async def signin(request: Request) -> Response:
    form = await checked_form(request)
    acct = user_for_token(inbox(request).settings.data_dir, one(form, "token"))
    if acct is None:
        return render(request, "signin.html", status=403, failed=True)
    request.session.clear()  # a new session on sign-in: nothing carried over from before
    request.session.update(user=acct.name, key=acct.session_key)
    return redirect("/")


async def signout(request: Request) -> Response:
    await checked_form(request)
    request.session.clear()
    return redirect("/signin")


async def home(request: Request) -> Response:
    return await gate_pages.waiting_list(request)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code in (301, 302, 303, 307) and exc.headers:
        return redirect(exc.headers["Location"])
    return error_page(request, str(exc.detail), exc.status_code)


def create_app(settings: Settings, client: Any = None, *, secure_cookies: bool = False) -> Starlette:
    """The inbox for this deployment; `client` a connected Temporal client (else one is
    connected at startup from the settings, as the CLI connects)."""
    state = Inbox(settings=settings, client=client)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if state.client is None:
            from vicar.connect import connect

            state.client = await connect(settings)
        yield

    routes = [
        Route("/", home),
        Route("/signin", signin_page),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]),
        Route("/gates/{workflow_id:path}", gate_pages.gate_page),
        Route("/answer", gate_pages.answer, methods=["POST"]),
        Route("/batch", gate_pages.batch_confirm, methods=["POST"]),
        Route("/batch/approve", gate_pages.batch_approve, methods=["POST"]),
        Route("/feed", oversight_pages.feed),
        Route("/review", oversight_pages.review, methods=["POST"]),
        Route("/rules", oversight_pages.rules),
        Route("/control", oversight_pages.control, methods=["POST"]),
        Route("/health", oversight_pages.health),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [
        Middleware(
            SessionMiddleware,
            secret_key=session_secret(settings.data_dir),
            session_cookie=SESSION_COOKIE,
            max_age=SESSION_DAYS * 86400,
            # A link from chat is a cross-site GET: it must carry the session (not "strict").
            same_site="lax",
            https_only=secure_cookies,
        )
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error, VicarError: vicar_error, Exception: _unexpected},
    )
    app.state.inbox = state
    return app


async def _unexpected(request: Request, exc: Exception) -> Response:
    from temporalio.service import RPCError

    if isinstance(exc, RPCError):
        return vicar_error(request, exc)
    return error_page(request, f"unexpected {type(exc).__name__}: the server's log has the details", 500)


__all__ = ["create_app", "account"]
