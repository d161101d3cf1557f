"""The waiting list, a gate's page, and answering: one gate, or many approved together
after a confirmation that lists them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from vicar.client.gates import list_escalations
from vicar.errors import InvalidInput, VicarError, validation_summary
from vicar.inbox.gate_data import load_gate
from vicar.inbox.web import (
    MAX_BATCH,
    check_workflow_id,
    checked_form,
    client_as,
    inbox,
    one,
    redirect,
    refusal,
    render,
    signed_in,
)
from vicar.models import GateDetails, HumanAnswer
from vicar.models.vocabulary import CfAState

BATCH_CONCURRENCY = 8  # answers in flight at once: each is one update, a round trip or two


def _sort_key(d: GateDetails) -> tuple[float, float]:
    deadline, since = d.deadline, d.escalated_at
    far = datetime.max.replace(tzinfo=UTC).timestamp()
    return (deadline.timestamp() if deadline else far, since.timestamp() if since else 0.0)


async def visible_gates(request: Request) -> list[GateDetails]:
    """Every waiting gate this person may answer, soonest deadline first (then oldest)."""
    acct = signed_in(request)
    gates = await list_escalations(inbox(request).client)
    allowed: dict[str, bool] = {}
    out = []
    for d in gates:
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


FILTERS = ("principal", "state", "task_type")
FLASH_CHARS = 300


def list_address(query: str) -> str:
    """The list's address with only its own filters kept from `query`: where a tap on the
    list returns to (never an address a form could point elsewhere)."""
    kept = [(k, v[:200]) for k, v in parse_qsl(query) if k in FILTERS and v]
    return "/?" + urlencode(kept) if kept else "/"


async def waiting_list(request: Request) -> Response:
    gates = await visible_gates(request)
    want = {k: request.query_params.get(k, "") for k in FILTERS}
    shown = [
        d
        for d in gates
        if (not want["principal"] or d.principal == want["principal"])
        and (not want["state"] or d.state.value == want["state"])
        and (not want["task_type"] or d.task_type == want["task_type"])
    ]
    now = datetime.now(UTC)
    rows = []
    for d in shown:
        rows.append(
            dict(
                d=d,
                wid=d.workflow_id,
                waited=waited(d.escalated_at, now),
                deadline=d.deadline,
                excerpt=d.artifact_excerpt or "",
                agent=d.upstream_agent,
            )
        )
    return render(
        request,
        "list.html",
        flash=request.session.pop("flash", None),
        here=list_address(request.url.query),
        rows=rows,
        total=len(gates),
        want=want,
        principals=sorted({d.principal for d in gates}),
        states=[s.value for s in CfAState],
        task_types=sorted({d.task_type for d in gates}),
    )


async def gate_page(request: Request) -> Response:
    acct = signed_in(request)
    wid = check_workflow_id(request.path_params["workflow_id"])
    page = await load_gate(inbox(request), wid)
    why_not = refusal(request, acct, page.v.principal)
    if why_not:
        return render(request, "error.html", status=403, message=why_not)
    return render(request, "gate.html", g=page, now=datetime.now(UTC))


async def _answer_one(request: Request, wid: str, ans: HumanAnswer) -> str:
    from vicar.client.gates import answer_gate, find_gate
    from vicar.workflows import search_attributes as sa

    acct = signed_in(request)
    _, desc = await find_gate(inbox(request).client, wid)
    principal = desc.typed_search_attributes.get(sa.PRINCIPAL) or "?"
    why_not = refusal(request, acct, principal)
    if why_not:
        raise PermissionError(why_not)
    return await answer_gate(await client_as(inbox(request), acct.name), wid, ans)


async def answer(request: Request) -> Response:
    acct = signed_in(request)
    form = await checked_form(request)
    wid = check_workflow_id(one(form, "workflow_id"))
    text = one(form, "text").strip()
    inbox(request).settings.check_texts(answer_text=text)  # the limit named, with its setting
    # The responder is the signed-in account, never a name from the form.
    try:
        ans = HumanAnswer(action=one(form, "action"), text=text, responder=acct.name)
    except ValidationError as exc:
        raise InvalidInput(f"invalid answer: {validation_summary(exc)[:300]}") from None
    back = one(form, "back")
    try:
        reply = await _answer_one(request, wid, ans)
    except PermissionError as exc:
        return render(request, "error.html", status=403, message=str(exc))
    except VicarError as exc:
        if not back.startswith("/"):
            raise
        # Tapped on the list (someone else answered first, say): the list again, with why.
        return _back_to_list(request, back, f"not answered: {wid} · {exc}", ok=False)
    if ans.action == "dialog":
        return redirect(f"/gates/{wid}")
    if back.startswith("/"):  # tapped on the list: back to it, as filtered, saying what was done
        return _back_to_list(request, back, f"{ans.action}: {wid} · {reply}", ok=True)
    return render(request, "answered.html", results=[(wid, ans.action, True, reply)], done=1)


def _back_to_list(request: Request, back: str, said: str, ok: bool) -> Response:
    request.session["flash"] = {"said": said[:FLASH_CHARS], "ok": ok}
    return redirect(list_address(back.partition("?")[2]))


def _selected(form: dict[str, list[str]]) -> list[str]:
    wids = list(dict.fromkeys(form.get("workflow_id", [])))
    if not wids:
        raise InvalidInput("no gate selected: tick the gates to approve")
    if len(wids) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH:,} gates at once")
    return [check_workflow_id(w) for w in wids]


async def batch_confirm(request: Request) -> Response:
    signed_in(request)
    form = await checked_form(request)
    wids = _selected(form)
    by_id = {d.workflow_id: d for d in await visible_gates(request)}
    chosen = [by_id[w] for w in wids if w in by_id]
    gone = [w for w in wids if w not in by_id]
    return render(request, "confirm.html", gates=chosen, gone=gone)


async def batch_approve(request: Request) -> Response:
    acct = signed_in(request)
    form = await checked_form(request)
    wids = _selected(form)
    text = one(form, "text").strip()
    inbox(request).settings.check_texts(answer_text=text)
    # One listing decides which ids are waiting gates this person may answer: an id that
    # is not one costs no call to Temporal.
    waiting = {d.workflow_id for d in await visible_gates(request)}
    limit = asyncio.Semaphore(BATCH_CONCURRENCY)

    async def go(wid: str) -> tuple[str, str, bool, str]:
        if wid not in waiting:
            return wid, "approve", False, "not waiting for you"
        async with limit:
            try:
                ans = HumanAnswer(action="approve", text=text, responder=acct.name)
                return wid, "approve", True, await _answer_one(request, wid, ans)
            except (VicarError, PermissionError) as exc:
                return wid, "approve", False, str(exc)

    results = await asyncio.gather(*(go(w) for w in wids))
    return render(request, "answered.html", results=results, done=sum(r[2] for r in results))
