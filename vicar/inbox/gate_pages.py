"""The waiting list (each gate a card saying why it came to the person, vicar.inbox.cards;
filtered, searched, with what is new since the person last looked) and a gate's page;
answering is vicar.inbox.answering."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import Response

from vicar.client.gates import list_escalations
from vicar.errors import NotFound
from vicar.inbox import drafts, held
from vicar.inbox.cards import RULE, Card, card, controls_of
from vicar.inbox.gate_data import load_gate
from vicar.inbox.web import (
    check_workflow_id,
    inbox,
    not_yours,
    redirect,
    refusal,
    render,
    seen_token,
    shown_token,
    signed_in,
)
from vicar.models import GateDetails
from vicar.models.vocabulary import CfAState

SEARCH_CHARS = 200


def _sort_key(d: GateDetails) -> tuple[float, float]:
    deadline, since = d.deadline, d.escalated_at
    far = datetime.max.replace(tzinfo=UTC).timestamp()
    return (deadline.timestamp() if deadline else far, since.timestamp() if since else 0.0)


async def visible_gates(request: Request) -> list[GateDetails]:
    """Every waiting gate this person may answer and has not answered (an answer held
    for its undo counts), soonest deadline first (then oldest)."""
    acct = signed_in(request)
    gates = await list_escalations(inbox(request).client)
    mine = held.held_gates(inbox(request).settings.data_dir, acct.name)
    allowed: dict[str, bool] = {}
    out = []
    for d in gates:
        if d.workflow_id in mine:
            continue
        if d.principal not in allowed:
            allowed[d.principal] = refusal(request, acct, d.principal) is None
        if allowed[d.principal]:
            out.append(d)
    return sorted(out, key=_sort_key)


def waited(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "?"
    minutes = max(int((now - since).total_seconds()), 0) // 60
    days, rest = divmod(minutes, 1440)
    if days:
        return f"{days}d {rest // 60}h"
    return f"{rest // 60}h {rest % 60:02d}m" if rest >= 60 else f"{rest}m"


FILTERS = ("principal", "state", "task_type", "q")


async def cards_for(request: Request, gates: list[GateDetails]) -> dict[str, Card]:
    """Each gate's card; the rules are read only of principals a rule asked for."""
    ruled = {d.principal for d in gates if d.calibration_guard == RULE}
    controls = await controls_of(inbox(request).client, ruled) if ruled else {}
    from vicar.models.control import describe

    return {d.workflow_id: card(d, controls.get(d.principal), describe=describe) for d in gates}


def _found(d: GateDetails, words: str) -> bool:
    """The search: every word somewhere in what the card shows (any case)."""
    hay = " ".join(
        [d.question, d.artifact_excerpt, d.principal, d.task_type, d.upstream_agent or "", d.gate_id, d.proxy_text]
    ).lower()
    return all(w in hay for w in words.lower().split())


def list_address(query: str) -> str:
    """The list's address with only its own filters kept from `query`: where a tap on the
    list returns to (never an address a form could point elsewhere)."""
    kept = [(k, v[:SEARCH_CHARS]) for k, v in parse_qsl(query) if k in FILTERS and v]
    return "/?" + urlencode(kept) if kept else "/"


async def waiting_list(request: Request) -> Response:
    gates = await visible_gates(request)
    want = {k: request.query_params.get(k, "")[:SEARCH_CHARS] for k in FILTERS}
    shown = [
        d
        for d in gates
        if (not want["principal"] or d.principal == want["principal"])
        and (not want["state"] or d.state.value == want["state"])
        and (not want["task_type"] or d.task_type == want["task_type"])
        and (not want["q"] or _found(d, want["q"]))
    ]
    now = datetime.now(UTC)
    # New: escalated since this browser last looked at the list (kept in its session).
    last = request.session.get("looked")
    looked = datetime.fromtimestamp(last, UTC) if isinstance(last, (int, float)) else None
    request.session["looked"] = now.timestamp()
    cards = await cards_for(request, shown)
    rows = []
    for d in shown:
        rows.append(
            dict(
                d=d,
                wid=d.workflow_id,
                c=cards[d.workflow_id],
                shown=shown_token(request, d.workflow_id, now.timestamp()),
                waited=waited(d.escalated_at, now),
                deadline=d.deadline,
                agent=d.upstream_agent,
                new=looked is None or (d.escalated_at is not None and d.escalated_at > looked),
            )
        )
    return render(
        request,
        "list.html",
        here=list_address(request.url.query),
        rows=rows,
        total=len(gates),
        unread=sum(r["new"] for r in rows),
        want=want,
        principals=sorted({d.principal for d in gates}),
        states=[s.value for s in CfAState],
        task_types=sorted({d.task_type for d in gates}),
    )


async def gate_page(request: Request) -> Response:
    acct = signed_in(request)
    wid = check_workflow_id(request.path_params["workflow_id"])
    try:
        page = await load_gate(inbox(request), wid, whole=request.query_params.get("whole") == "1")
    except NotFound as exc:  # said as a gate not one's own is: no oracle of which gates exist
        return not_yours(request, str(exc))
    why_not = refusal(request, acct, page.v.principal)
    if why_not:
        return not_yours(request, why_not)
    from vicar.models.control import describe

    controls = await controls_of(inbox(request).client, {page.v.principal}) if page.v.calibration_guard == RULE else {}
    c = card(
        page.v,
        controls.get(page.v.principal),
        describe=describe,
        escalation_mode=page.v.escalation_mode,
        excerpt=page.excerpt,
        on_page=True,
    )
    if page.files_refused:
        c.shown, c.shown_words = False, "Part of the artifact could not be shown: " + page.files_refused
    elif page.cut:
        c.shown_words = "Only the artifact's start is shown below: Show the whole artifact for the rest"
    # A cut artifact's page approves nothing until the rest was opened (its token says so).
    kind = "cut" if page.cut else "whole" if page.whole else "page"
    # No listing here (it costs as much as the list page): next/previous are looked up
    # when followed (`step`).
    return render(
        request,
        "gate.html",
        g=page,
        c=c,
        now=datetime.now(UTC),
        seen=seen_token(request, wid, kind),
        shown=shown_token(request, wid),
        draft=drafts.take(inbox(request).settings.data_dir, acct.name, wid),
        undo_seconds=inbox(request).undo_seconds,
    )


async def step(request: Request) -> Response:
    """/gates-next?after=<id> (or before=): the waiting gate after (before) that one in
    the list's order; the first (last) when it no longer waits; the list when none does."""
    signed_in(request)
    after, before = request.query_params.get("after", ""), request.query_params.get("before", "")
    here = check_workflow_id(after or before)
    waiting = [d.workflow_id for d in await visible_gates(request)]
    others = [w for w in waiting if w != here]
    if not others:
        return redirect("/")
    if here not in waiting:
        return redirect(f"/gates/{others[0] if after else others[-1]}")
    at = waiting.index(here)
    pick = waiting[(at + 1) % len(waiting)] if after else waiting[at - 1]
    return redirect(f"/gates/{pick}")
