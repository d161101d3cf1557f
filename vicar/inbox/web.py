"""What every inbox page shares: the app's state, the signed-in account, the CSRF check
and the one-line error page."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from vicar.errors import Conflict, InvalidInput, NotFound, NotResponding, NotReviewable, VicarError
from vicar.inbox.accounts import Account, load_user
from vicar.inbox.sessions import session_alive
from vicar.inbox.throttle import Limit, Throttle
from vicar.responders import load_policy
from vicar.settings import Settings

HERE = Path(__file__).parent
# A gate's workflow id: "vicar-gate/" and a gate id (letters, digits and . _ : @ / -), or
# an id another client chose with the same characters.
WORKFLOW_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,254}")
MAX_BATCH = 1000  # gates approved together
MAX_FORM_FIELDS = MAX_BATCH + 10  # the batch's ids and a few more fields
# A form's whole body: 20,000 characters of words (the default answer limit) sent
# percent-encoded take up to 12 bytes each; a batch of 1,000 ids takes under 300 KB.
MAX_BODY_BYTES = 512 * 1024
# Wrong tokens from one client address: 10 at once, then one every 6 s. A token is 256
# random bits, so this guards the server's time and log more than the tokens.
SIGNIN_ADDRESS = Limit(burst=10, per_seconds=60)
# Sign-ins into one account, from anywhere: each opens a session kept on disk (the
# oldest past 20 ends), and a person signs in a few times a day.
SIGNIN_ACCOUNT = Limit(burst=30, per_seconds=3600)
STATUS = {NotFound: 404, InvalidInput: 400, Conflict: 409, NotReviewable: 409, NotResponding: 503}


@dataclass
class Inbox:
    settings: Settings
    client: Any = None  # temporalio Client, connected at startup unless given
    clients: dict[str, Any] = field(default_factory=dict)  # per account: client_as
    trails: dict[str, tuple[float, list]] = field(default_factory=dict)  # per principal: oversight_pages.trail
    # Sign-ins refused past their limits: per client address, per account.
    signin_address: Throttle = field(default_factory=lambda: Throttle(SIGNIN_ADDRESS))
    signin_account: Throttle = field(default_factory=lambda: Throttle(SIGNIN_ACCOUNT))
    undo_seconds: float = 10.0  # how long an answer is held before it is sent (vicar.inbox.held)
    templates: Environment = field(
        default_factory=lambda: Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
    )


async def client_as(state: Inbox, name: str) -> Any:
    """A client whose Temporal identity is the account's name: the gate records it beside
    the responder, and a worker with VICAR_REQUIRE_IDENTITY_MATCH=1 requires the two to
    agree (docs/identity.md). One connection per account, made on its first answer."""
    import dataclasses

    from temporalio.client import Client
    from temporalio.service import ServiceClient

    if name not in state.clients:
        base = state.client
        config = dataclasses.replace(base.service_client.config, identity=name)
        state.clients[name] = Client(
            await ServiceClient.connect(config), namespace=base.namespace, data_converter=base.data_converter
        )
    return state.clients[name]


def inbox(request: Request) -> Inbox:
    return request.app.state.inbox


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str) or len(token) < 32:
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return token


def seen_token(request: Request, wid: str) -> str:
    """What the gate's page puts in its answer forms: proof the page was shown to this
    session (the session's CSRF secret keyed over the gate's id)."""
    key = csrf_token(request).encode()
    return hmac.new(key, wid.encode(), hashlib.sha256).hexdigest()[:32]


def account(request: Request) -> Account | None:
    """The signed-in account, if its session is still open on the server (not signed out,
    not expired) and matches the account's current token."""
    name, key, sid = (request.session.get(k) for k in ("user", "key", "sid"))
    if not isinstance(name, str) or not isinstance(key, str) or not isinstance(sid, str):
        return None
    data_dir = inbox(request).settings.data_dir
    acct = load_user(data_dir, name)
    if acct is None or not hmac.compare_digest(acct.session_key, key) or not session_alive(data_dir, name, sid):
        return None
    return acct


def signed_in(request: Request) -> Account:
    acct = account(request)
    if acct is None:
        if request.method == "GET":
            raise HTTPException(303, headers={"Location": "/signin"})
        raise HTTPException(403, "sign in first")
    return acct


async def checked_form(request: Request) -> dict[str, list[str]]:
    """The POSTed form, refused (403) without the session's CSRF token. Its size is
    checked before a byte of it is read: a form declares its length (browsers always
    do), at most MAX_BODY_BYTES, and the server reads no more than it declared."""
    declared = request.headers.get("content-length", "")
    if not declared.isdigit():
        raise HTTPException(411, "a form must say its length (Content-Length)")
    if int(declared) > MAX_BODY_BYTES:
        raise HTTPException(413, f"the form is over {MAX_BODY_BYTES // 1024:,} KB: send fewer gates or shorter words")
    try:
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_BODY_BYTES)
    except HTTPException as exc:  # starlette's parser stops at the first field over its bounds
        if "fields" in str(exc.detail):
            raise InvalidInput(f"the form has too many fields: at most {MAX_BATCH:,} gates at once") from None
        raise InvalidInput(f"the form is refused: {exc.detail}") from None
    sent = form.get("csrf")
    expected = request.session.get("csrf")
    if not isinstance(sent, str) or not isinstance(expected, str) or not hmac.compare_digest(sent, expected):
        raise HTTPException(403, "the form's CSRF token is missing or wrong: reload the page and try again")
    return {k: [v for v in form.getlist(k) if isinstance(v, str)] for k in form.keys()}


def one(form: dict[str, list[str]], name: str, default: str = "") -> str:
    values = form.get(name) or [default]
    return values[0]


def check_workflow_id(workflow_id: str) -> str:
    if not WORKFLOW_ID_RE.fullmatch(workflow_id or "") or "//" in workflow_id or ".." in workflow_id:
        raise InvalidInput(f"invalid gate {workflow_id[:80]!r}: not a gate's workflow id")
    return workflow_id


def refusal(request: Request, acct: Account, principal: str) -> str | None:
    return refusal_for(inbox(request), acct, principal)


def refusal_for(state: Inbox, acct: Account, principal: str) -> str | None:
    """Why this account may not answer for `principal` (None: it may): the account's own
    principals, then the principal's allow-list read closed (a principal with no list is
    answered here by itself only; the gate checks its list again)."""
    if not acct.answers_for(principal):
        return f"{acct.name!r} does not answer for {principal} in this inbox"
    try:
        return load_policy(state.settings.principals_dir, principal).closed_refusal(principal, acct.name)
    except VicarError as exc:
        return str(exc)


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    from vicar.inbox import held

    acct = context.pop("acct", None) or account(request)
    state = inbox(request)
    page = state.templates.get_template(template)
    if acct is not None:  # every page says what is held (to undo) and how sent answers went
        context.setdefault("held_now", held.pending(state.settings.data_dir, acct.name))
        context.setdefault("said", held.said_lines(state.settings.data_dir, acct.name))
        context.setdefault("flash", request.session.pop("flash", None))
    html = page.render(csrf=csrf_token(request), me=acct, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


# No scripts but our own, no framing: the page shows text agents wrote.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def error_page(request: Request, message: str, status: int) -> Response:
    try:
        return render(request, "error.html", status=status, message=message)
    except Exception:  # the error page itself failed (no session): plain text, still one line
        return PlainTextResponse(message, status_code=status, headers=SECURITY_HEADERS)


def vicar_error(request: Request, exc: Exception) -> Response:
    from temporalio.service import RPCError

    if isinstance(exc, VicarError):
        status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 500)
        return error_page(request, str(exc), status)
    if isinstance(exc, RPCError):
        return error_page(request, f"Temporal did not answer: {exc}", 503)
    raise exc


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)
