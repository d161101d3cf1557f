"""What every inbox page shares: the app's state, the signed-in account, the CSRF check,
the tokens an answer form carries (the page was shown, and when), the one refusal an
account meets for a gate not its own, and the one-line error page (a Temporal that does
not answer for a moment: a page that tries again by itself)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from vicar.errors import Conflict, InvalidInput, NotFound, NotResponding, NotReviewable, Unreachable, VicarError
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
# An answer is taken only from a card (a list's, a gate's page, a batch's confirmation)
# that was on screen this long: a second tap, a key's repeat or a second `a` lands on the
# page that replaced the answered one, and must not answer it unread.
SHOWN_AT_LEAST = 1.0
SHOWN_AT_MOST = 7 * 86400.0  # a page left open a week is read again before it answers
# The one refusal for a gate that is not the account's and for one that does not exist:
# nothing about who may answer, nor whether the gate is there (no 403/404 oracle).
NOT_YOURS = "not yours to answer"
RETRY_SECONDS = 3  # a page Temporal did not answer asks again this often, by itself
log = logging.getLogger("uvicorn.error")


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
    # Rules removed on the rules page, kept for their Undo: key -> (account, principal, rule).
    removed_rules: dict[str, tuple[str, str, dict]] = field(default_factory=dict)
    templates: Environment = field(default_factory=lambda: templates())


def templates() -> Environment:
    from vicar.models.plain import plain_text, state_words

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["plain_state"] = state_words  # PLAN_ASSERT -> "plan": the tags stay in the data
    env.filters["plain"] = plain_text  # the same, for a tag inside a line
    return env


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


def _mac(request: Request, what: str) -> str:
    return hmac.new(csrf_token(request).encode(), what.encode(), hashlib.sha256).hexdigest()[:32]


def seen_token(request: Request, wid: str, kind: str = "page") -> str:
    """What the gate's page puts in its answer forms: proof the page was shown to this
    session (the session's CSRF secret keyed over the gate's id). `kind`: "page" (the
    whole artifact on it), "cut" (cut at the view's bound, the rest not opened: no
    approve from it) or "whole" (the rest opened)."""
    return _mac(request, wid) if kind == "page" else _mac(request, f"{kind}|{wid}")


def seen_kind(request: Request, token: str, wid: str) -> str:
    """Which page `token` says was shown ("" : none of this session's)."""
    for kind in ("page", "whole", "cut"):
        if token and hmac.compare_digest(token, seen_token(request, wid, kind)):
            return kind
    return ""


def shown_token(request: Request, what: str, at: float | None = None) -> str:
    """What an answer form carries: when its card was rendered (ms), signed with the
    session's secret over what it answers (a gate's id, or a batch's)."""
    ms = int(1000 * (time.time() if at is None else at))
    return f"{ms}.{_mac(request, f'shown|{what}|{ms}')}"


def shown_for(request: Request, token: str, what: str) -> float | None:
    """Seconds since the card was rendered, by the form's token (None: not a token this
    session minted for `what`)."""
    ms, _, mac = token.partition(".")
    if not ms.isdigit() or len(ms) > 15 or not hmac.compare_digest(mac, _mac(request, f"shown|{what}|{ms}")):
        return None
    return time.time() - int(ms) / 1000


def batch_key(wids: list[str]) -> str:
    return "batch:" + hashlib.sha256("\n".join(sorted(wids)).encode()).hexdigest()


def too_soon(request: Request, form: dict[str, list[str]], what: str) -> str:
    """Why the form's card cannot answer yet ("" : it can): not shown by this session,
    shown under SHOWN_AT_LEAST ago, or so long ago that it must be read again."""
    age = shown_for(request, one(form, "shown"), what)
    if age is None:
        return "this page did not show it: reload, read it, then answer"
    if age < SHOWN_AT_LEAST:
        return f"it was on the screen for less than {SHOWN_AT_LEAST:g} s; read it, then answer"
    if age > SHOWN_AT_MOST:
        return "the page is days old: reload, read it, then answer"
    return ""


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


def not_yours(request: Request, why: str, status: int = 403) -> Response:
    """The refusal an account meets for a gate (or a principal) not its own, and for one
    that does not exist: the same words, the same status. Why it was refused is the
    server's log's (one line)."""
    acct = request.session.get("user", "?")
    log.info("inbox: %s refused %s %s: %s", acct, request.method, request.url.path, " ".join(why.split())[:300])
    return render(request, "error.html", status=status, message=NOT_YOURS)


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
        # The newest first: the Undo nearest the top takes back the answer just given.
        newest = sorted(held.pending(state.settings.data_dir, acct.name), key=lambda h: -h.due)
        context.setdefault("held_now", newest)
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

    if isinstance(exc, NotResponding | Unreachable | RPCError):  # a moment's: the page asks again
        return temporal_blip(request, exc)
    if isinstance(exc, VicarError):
        status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 500)
        return error_page(request, str(exc), status)
    raise exc


def temporal_blip(request: Request, exc: Exception) -> Response:
    """Temporal did not answer (a loaded server's moment, a restart): one line in the
    log, never a traceback; a page read (GET) tries again by itself every RETRY_SECONDS,
    a form is said not taken (its answer was not held: send it again)."""
    said = " ".join((str(exc) or type(exc).__name__).split())[:200]
    again = request.method == "GET"
    log.warning(
        "inbox: Temporal did not answer %s %s: %s%s",
        request.method,
        request.url.path,
        said,
        f"; the page tries again by itself in {RETRY_SECONDS} s" if again else "",
    )
    if again:
        message = f"Temporal did not answer just now. This page tries again by itself in {RETRY_SECONDS} s."
    else:
        message = "Temporal did not answer just now: nothing was taken. Go back and send it again."
    page: Response
    try:
        page = render(request, "error.html", status=503, message=message, retry=RETRY_SECONDS if again else None)
    except Exception:  # noqa: BLE001  (the page needs the session: plain text, still one line)
        page = PlainTextResponse(message, status_code=503, headers=SECURITY_HEADERS)
    page.headers["Retry-After"] = str(RETRY_SECONDS)
    return page


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)
