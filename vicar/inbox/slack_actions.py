"""Slack's buttons that answer (docs/slack.md): the inbox's POST /slack/actions, the
Request URL of the Slack app's Interactivity.

A tap on Approve (or on "Approve, ask me first", which keeps the gate's kind of action
with the person) in a notice (vicar/models/chat.py) arrives as Slack's `block_actions`
payload. It is taken only when signed with the app's signing secret
(VICAR_SLACK_SIGNING_SECRET: HMAC-SHA256 over `v0:<timestamp>:<body>`, compared in
constant time by slack-sdk's SignatureVerifier, the timestamp within five minutes), and
only once: a request seen before (its timestamp and signature) is refused while its
timestamp would still pass. The Slack user must be one VICAR_SLACK_USERS maps to an inbox
account, and that account must answer for the gate's principal exactly as in the inbox
(its own principals, then the principal's allow-list read closed); the gate checks the
list again. The request is acknowledged at once (Slack wants an answer within three
seconds) and the gate answered after the response has gone; the outcome then replaces
the message's buttons through Slack's response_url. A GET decides nothing (405). A
Reject (on a message sent before notices lost that button) is refused: a reject needs the
person's words, which a tap does not carry. What the tapper reads names no setting and no
allow-list: "not yours to answer", as in the inbox; the log has the reason."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from vicar.errors import NotFound, VicarError
from vicar.inbox.accounts import load_user
from vicar.inbox.web import NOT_YOURS, Inbox, check_workflow_id, client_as, inbox
from vicar.models import HumanAnswer
from vicar.models.chat import ANSWER_ACTIONS, ASK_FIRST_ACTION, escape
from vicar.responders import load_policy
from vicar.settings import ReadAtUse, secret

log = logging.getLogger("uvicorn.error")
# Slack's interaction payloads carry the message they came from: tens of kilobytes.
MAX_BODY_BYTES = 1 << 20
FRESH_SECONDS = 5 * 60  # slack-sdk's and Slack's own tolerance
SEEN_MAX = 10_000  # requests remembered against replay (five minutes' worth at a busy inbox)
RESPONSE_TIMEOUT_SECONDS = 10.0
# Where a response_url may point: Slack's own hosts (and loopback, for a stand-in).
SLACK_HOST_SUFFIX = ".slack.com"


class SlackUser(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(max_length=64)


class SlackAction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action_id: str = Field(max_length=255)
    value: str = Field("", max_length=2000)


class BlockActions(BaseModel):
    """The parts of Slack's block_actions payload that are read; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")
    type: str = Field(max_length=64)
    user: SlackUser
    actions: list[SlackAction] = Field(default_factory=list, max_length=25)
    response_url: str | None = Field(None, max_length=2000)


class Seen:
    """Requests already taken, remembered while their timestamps are fresh."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, float] = OrderedDict()

    def first_time(self, key: str, now: float) -> bool:
        while self._seen and (next(iter(self._seen.values())) < now - 2 * FRESH_SECONDS or len(self._seen) > SEEN_MAX):
            self._seen.popitem(last=False)
        if key in self._seen:
            return False
        self._seen[key] = now
        return True


def _seen(request: Request) -> Seen:
    state = request.app.state
    if not hasattr(state, "slack_seen"):
        state.slack_seen = Seen()
    return state.slack_seen


def _refused(status: int, why: str, request: Request) -> Response:
    client = request.client.host if request.client else "?"
    log.warning("slack: request from %s refused: %s", client, why)
    return PlainTextResponse(why, status_code=status)


async def interaction(request: Request) -> Response:
    state = inbox(request)
    signing = secret(ReadAtUse().slack_signing_secret)
    if not signing:
        return _refused(403, "Slack interactions are off: VICAR_SLACK_SIGNING_SECRET is not set", request)
    declared = request.headers.get("content-length", "")
    if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
        return _refused(413, f"a Slack request says its length, at most {MAX_BODY_BYTES} bytes", request)
    body = await request.body()
    if len(body) > int(declared):
        return _refused(400, "the body is longer than it said", request)
    stamp = request.headers.get("x-slack-request-timestamp", "")
    signature = request.headers.get("x-slack-signature", "")
    if not stamp.isdigit() or len(stamp) > 12 or not signature:
        return _refused(401, "not signed by Slack", request)
    from slack_sdk.signature import SignatureVerifier

    if not SignatureVerifier(signing).is_valid(body, stamp, signature):
        return _refused(401, "not signed by Slack, or signed more than five minutes ago", request)
    # Signed and fresh: refused only if this very request was taken before (a replay).
    if not _seen(request).first_time(hashlib.sha256(f"{stamp}:{signature}".encode()).hexdigest(), time.time()):
        return _refused(409, "this request was taken before (a replay)", request)
    try:
        raw = parse_qs(body.decode("utf-8"), max_num_fields=10).get("payload", [""])[0]
        payload = BlockActions.model_validate(json.loads(raw))
    except (ValueError, ValidationError):
        return _refused(400, "not a Slack interaction payload", request)
    answering = [a for a in payload.actions if a.action_id in ANSWER_ACTIONS]
    if payload.type != "block_actions" or not answering:
        return Response(status_code=200)  # the Open button's tap, or something Vicar does not answer
    action = answering[0]
    # Acknowledged now; the gate is answered once the response has gone.
    return Response(status_code=200, background=BackgroundTask(_answer, state, payload, action))


def _response_url(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if (parts.scheme == "https" and host.endswith(SLACK_HOST_SUFFIX)) or (
        parts.scheme in ("http", "https") and loopback
    ):
        return url
    return None


async def _answer(state: Inbox, payload: BlockActions, action: SlackAction) -> None:
    """Answer the gate as the Slack user's account; tell Slack how it went."""
    verb = ANSWER_ACTIONS[action.action_id]
    reply_to = _response_url(payload.response_url)
    try:
        if verb != "approve":
            raise Refused(f"a {verb} needs your words: open the gate in the inbox to say why", "")
        wid = check_workflow_id(action.value)
        name = state.settings.slack_users.get(payload.user.id)
        acct = load_user(state.settings.data_dir, name) if name else None
        if acct is None:
            raise Refused(
                "your Slack account is not linked to an inbox account here: ask whoever runs Vicar to link it",
                f"Slack user {payload.user.id[:64]} is not in VICAR_SLACK_USERS, or its account is gone",
            )
        principal = await _principal(state, wid)
        why_not = (
            None if acct.answers_for(principal) else f"{acct.name!r} does not answer for {principal} in this inbox"
        ) or load_policy(state.settings.principals_dir, principal).closed_refusal(principal, acct.name)
        if why_not:
            raise Refused(NOT_YOURS, why_not)
        from vicar.client.gates import answer_gate, gate_details
        from vicar.inbox.cards import card

        # Never a blind approve: the inbox's rule for a one-tap approve.
        details = await gate_details(state.client, wid)
        blind = card(details, None).open_first if details else "its summary does not open here"
        if blind:
            raise Refused(f"open it in the inbox to answer: {blind}", "")
        asked = action.action_id == ASK_FIRST_ACTION
        answer = HumanAnswer(action=verb, text="", responder=acct.name, ask_first=asked)
        await answer_gate(await client_as(state, acct.name), wid, answer)
    except Refused as exc:
        log.warning("slack: %s from %s not taken: %s", verb, payload.user.id[:64], exc.logged or exc.said)
        await _tell(reply_to, _ephemeral(f"Not answered: {exc.said}"))
        return
    except VicarError as exc:
        # No such gate reads as another's gate does (no oracle); an answered one says so.
        said = NOT_YOURS if isinstance(exc, NotFound) else str(exc)
        log.warning("slack: %s from %s not taken: %s", verb, payload.user.id[:64], exc)
        await _tell(reply_to, _ephemeral(f"Not answered: {said}"))
        return
    except Exception:  # noqa: BLE001  (the response has gone: the log and Slack are told)
        log.exception("slack: %s failed", verb)
        await _tell(reply_to, _ephemeral("Not answered: an error (the inbox's log has it)"))
        return
    how = " (and ask me first)" if asked else ""
    done = f"Approved by {acct.name} from Slack{how}: {details.question if details else wid}"
    log.info("slack: %s (%s)", done, wid)
    line = escape(done[:2900])
    await _tell(
        reply_to,
        {
            "replace_original": True,
            "text": line,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{line}*"}}],
        },
    )


class Refused(Exception):
    """A tap not taken: what the tapper reads, and what the log keeps (the reason)."""

    def __init__(self, said: str, logged: str) -> None:
        super().__init__(said)
        self.said, self.logged = said, logged


def _ephemeral(line: str) -> dict[str, Any]:
    """A reply only the tapper sees; the message and its buttons stay."""
    return {"replace_original": False, "response_type": "ephemeral", "text": escape(line[:2900])}


async def _principal(state: Inbox, wid: str) -> str:
    from vicar.client.gates import find_gate
    from vicar.workflows import search_attributes as sa

    _, desc = await find_gate(state.client, wid)
    return desc.typed_search_attributes.get(sa.PRINCIPAL) or "?"


async def _tell(url: str | None, message: dict[str, Any]) -> None:
    """POST to Slack's response_url; a failure is logged (the answer stands)."""
    if url is None:
        return
    try:
        async with httpx.AsyncClient(timeout=RESPONSE_TIMEOUT_SECONDS) as http:
            reply = await http.post(url, json=message)
        if reply.status_code >= 400:
            log.warning("slack: response_url answered %s", reply.status_code)
    except httpx.HTTPError as exc:
        log.warning("slack: response_url unreachable: %s", type(exc).__name__)
