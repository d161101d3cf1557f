"""Answering from the inbox: one gate (a tap on the list, or the gate's page), many
approved together after a confirmation, and the short undo (vicar.inbox.held: every
answer is held for `undo_seconds`, then sent). A one-tap or batch approve of a gate
the person has not opened is refused when its card says it must be opened first
(vicar.inbox.cards), whatever the form says; an approve from the gate's page carries a
token only that page, in this session, could have given it (and a page whose artifact
was cut, whose rest was not opened, gives one that approves nothing). No answer is taken
from a card that was on screen for under a second (web.too_soon: a second tap or key
lands on the page that replaced the answered one); a correct or a reject needs words; a
large batch needs its count typed. Refused for a gate not the account's, or none: the
same "not yours to answer" (web.not_yours)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from vicar.errors import (
    CodecKeyError,
    Conflict,
    InvalidInput,
    NotFound,
    NotResponding,
    Unreachable,
    VicarError,
    validation_summary,
)
from vicar.inbox import drafts
from vicar.inbox import held as holds
from vicar.inbox.cards import card
from vicar.inbox.web import (
    MAX_BATCH,
    Inbox,
    batch_key,
    check_workflow_id,
    checked_form,
    client_as,
    inbox,
    not_yours,
    one,
    redirect,
    refusal_for,
    render,
    seen_kind,
    shown_token,
    signed_in,
    too_soon,
)
from vicar.models import GateDetails, HumanAnswer

log = logging.getLogger("uvicorn.error")
SEND_EVERY = 0.25  # seconds between looks for held answers whose window closed
SHUTDOWN_SECONDS = 10.0
FLASH_CHARS = 300
# Answers that say what to change or why not: never sent without words.
NEEDS_WORDS = {"correct": "what to change", "reject": "why not"}
BATCH_COUNT_FROM = 4  # a batch this large is approved only with its count typed


def flash(request: Request, said: str, ok: bool) -> None:
    request.session["flash"] = {"said": said[:FLASH_CHARS], "ok": ok}


async def _gate_memo(request: Request, wid: str) -> tuple[str, GateDetails | None, str]:
    """The gate's principal, the summary it wrote when it escalated (None: none), and
    why it no longer waits for an answer ("" : it waits); NotFound if there is no such
    gate."""
    from temporalio.client import WorkflowExecutionStatus

    from vicar import contracts as c
    from vicar.client.gates import find_gate
    from vicar.models import GateStatus
    from vicar.workflows import search_attributes as sa

    _, desc = await find_gate(inbox(request).client, wid)
    principal = desc.typed_search_attributes.get(sa.PRINCIPAL) or "?"
    status = desc.typed_search_attributes.get(sa.STATUS)
    stopped = ""
    if desc.status != WorkflowExecutionStatus.RUNNING or status != GateStatus.escalated.value:
        now = status or (desc.status.name.lower() if desc.status else "unknown")
        stopped = f"it does not wait for an answer now ({now})"
    try:
        memo = await desc.memo_value(c.ESCALATION_MEMO, None)
        details = GateDetails.model_validate(memo) if memo is not None else None
    except Exception:  # noqa: BLE001  (sealed with a key this process lacks, or not a gate's)
        details = None
    return principal, details, stopped


def _open_first(d: GateDetails | None) -> str:
    if d is None:
        return "its summary does not open here"
    return card(d, None).open_first


def _next_address(back: str, wid: str) -> str:
    from vicar.inbox.gate_pages import list_address

    return list_address(back.partition("?")[2]) if back.startswith("/") else f"/gates/{wid}"


async def answer(request: Request) -> Response:
    acct = signed_in(request)
    form = await checked_form(request)
    state = inbox(request)
    wid = check_workflow_id(one(form, "workflow_id"))
    text = one(form, "text").strip()
    state.settings.check_texts(answer_text=text)  # the limit named, with its setting
    # The responder is the signed-in account, never a name from the form.
    try:
        ans = HumanAnswer(
            action=one(form, "action"), text=text, responder=acct.name, ask_first=one(form, "ask_first") == "1"
        )
    except ValidationError as exc:
        raise InvalidInput(f"invalid answer: {validation_summary(exc)[:300]}") from None
    back = one(form, "back")
    from_list = back.startswith("/")
    try:
        principal, details, stopped = await _gate_memo(request, wid)
    except NotFound as exc:  # said as a gate not one's own is: no oracle of which gates exist
        return not_yours(request, str(exc))
    why_not = refusal_for(state, acct, principal)
    if why_not:
        return not_yours(request, why_not)

    def refused(why: str) -> Response:
        """Not taken: said on the page it came from (the words typed kept)."""
        flash(request, f"not answered: {wid} · {why}", ok=False)
        if not from_list:
            drafts.keep(state.settings.data_dir, acct.name, wid, ans.action, text)
        return redirect(_next_address(back, wid))

    if stopped:
        if not from_list:
            raise Conflict(stopped)
        return refused(stopped)
    if ans.action in NEEDS_WORDS and not text:
        return refused(f"a {ans.action} needs your words: say {NEEDS_WORDS[ans.action]} (open the gate to write them)")
    seen = seen_kind(request, one(form, "seen"), wid)
    if ans.action == "approve" and seen == "cut":
        return refused("open the whole artifact first: part of it is not on the page (Show the whole artifact)")
    if ans.action == "approve" and not seen:
        blind = _open_first(details)
        if blind:
            return refused(f"open it to answer: {blind}")
    if ans.action == "dialog":  # a question to the agents, not an answer: sent now
        from vicar.client.gates import answer_gate

        await answer_gate(await client_as(state, acct.name), wid, ans)
        return redirect(f"/gates/{wid}")
    if wid in holds.held_gates(state.settings.data_dir, acct.name):
        flash(request, f"not answered: {wid} · your answer to it is already held", ok=False)
        return redirect(_next_address(back, wid) if from_list else await next_gate(request, exclude={wid}))
    soon = too_soon(request, form, wid)
    if soon:
        return refused(soon)
    title = details.question if details else wid
    held = holds.new_held(
        acct.name, ans.action, text, state.undo_seconds, {wid: principal}, {wid: title}, ans.ask_first
    )
    holds.hold(state.settings.data_dir, held)
    if from_list:  # tapped on the list: back to it, as filtered
        return redirect(_next_address(back, wid))
    return redirect(await next_gate(request, exclude={wid}))


async def next_gate(request: Request, exclude: set[str]) -> str:
    """The page after answering on a gate's page: the next gate waiting (the list's
    order), else the list."""
    from vicar.inbox.gate_pages import visible_gates

    for d in await visible_gates(request):
        if d.workflow_id not in exclude:
            return f"/gates/{d.workflow_id}"
    return "/"


def _selected(form: dict[str, list[str]]) -> list[str]:
    wids = list(dict.fromkeys(form.get("workflow_id", [])))
    if not wids:
        raise InvalidInput("no gate selected: tick the gates to approve")
    if len(wids) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH:,} gates at once")
    return [check_workflow_id(w) for w in wids]


async def _split(request: Request, wids: list[str]) -> tuple[list[tuple[GateDetails, Any]], list[tuple[str, str]]]:
    """The chosen gates a batch may approve (each with its card) and the rest with why
    not. One listing decides which ids are waiting gates this person may answer: an id
    that is not one costs no call to Temporal."""
    from vicar.inbox.gate_pages import cards_for, visible_gates

    by_id = {d.workflow_id: d for d in await visible_gates(request)}
    chosen = [by_id[w] for w in wids if w in by_id]
    cards = await cards_for(request, chosen)
    ok, apart = [], []
    for w in wids:
        if w not in by_id:
            apart.append((w, "not waiting for you"))
            continue
        c = cards[w]
        if c.open_first:
            apart.append((w, f"open it to answer: {c.open_first} ({c.risk or c.why})"))
        else:
            ok.append((by_id[w], c))
    return ok, apart


async def batch_confirm(request: Request) -> Response:
    signed_in(request)
    form = await checked_form(request)
    ok, apart = await _split(request, _selected(form))
    listed = [d.workflow_id for d, _ in ok]
    return render(
        request,
        "confirm.html",
        gates=ok,
        apart=apart,
        shown=shown_token(request, batch_key(listed)),
        count_from=BATCH_COUNT_FROM,
    )


async def batch_approve(request: Request) -> Response:
    acct = signed_in(request)
    form = await checked_form(request)
    state = inbox(request)
    wids = _selected(form)
    text = one(form, "text").strip()
    state.settings.check_texts(answer_text=text)
    ok, apart = await _split(request, wids)
    if ok:
        # The confirmation listed exactly these ids; it was read (on screen a second) and,
        # for a large batch, its count typed.
        soon = too_soon(request, form, batch_key(wids))
        if soon:
            raise InvalidInput(f"not approved: {soon}")
        if len(wids) >= BATCH_COUNT_FROM and one(form, "count").strip() != str(len(wids)):
            raise InvalidInput(
                f"not approved: type {len(wids)} to approve all {len(wids)} (a batch of "
                f"{BATCH_COUNT_FROM} or more is approved with its count typed)"
            )
    held = None
    if ok:
        gates = {d.workflow_id: d.principal for d, _ in ok}
        titles = {d.workflow_id: d.question for d, _ in ok}
        held = holds.hold(
            state.settings.data_dir, holds.new_held(acct.name, "approve", text, state.undo_seconds, gates, titles)
        )
    return render(request, "answered.html", held=held, apart=apart, asked=len(wids))


async def undo(request: Request) -> Response:
    acct = signed_in(request)
    form = await checked_form(request)
    held_id = one(form, "held")
    try:
        taken = holds.undo(inbox(request).settings.data_dir, acct.name, held_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if taken is None:
        flash(request, "too late to undo: that answer was sent (the line about it says how it went)", ok=False)
        return redirect("/")
    flash(request, f"undone: {taken.label()} · nothing was sent", ok=True)
    if len(taken.gates) == 1:
        wid = next(iter(taken.gates))
        drafts.keep(inbox(request).settings.data_dir, acct.name, wid, taken.action, taken.text)  # back in its field
        return redirect(f"/gates/{wid}")
    return redirect("/")


async def _has_it(client: Any, wid: str, ans: HumanAnswer) -> bool:
    """Whether the gate ended with this answer from this person (so it was sent)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError

    from vicar.models import GateResult

    try:
        handle = client.get_workflow_handle(wid, result_type=GateResult)
        result = await asyncio.wait_for(handle.result(), 5.0)
    except (WorkflowFailureError, RPCError, TimeoutError, ValueError):
        return False
    return (
        result.answered_by.value == "human"
        and result.responder == ans.responder
        and result.action.value == ans.action
        and (result.text or "") == ans.text
    )


# Refusals a later try would not change: the gate has another answer or has ended, it
# is not a gate, the answer or the account is not allowed, its payloads do not open.
FINAL_REFUSALS = (Conflict, NotFound, InvalidInput, CodecKeyError)


def _why_later(exc: BaseException) -> str:
    """Why a try did not reach its gate, as the person reads it: never "not sent" for a
    gate that merely has not taken the answer yet (it may take it while it waits)."""
    from temporalio.service import RPCError, RPCStatusCode

    said = " ".join((str(exc) or type(exc).__name__).split())[:300]
    if isinstance(exc, NotResponding):
        return f"its gate has not taken it yet: {said}"
    unreachable = isinstance(exc, Unreachable | OSError | TimeoutError) or (
        isinstance(exc, RPCError) and exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
    )
    if unreachable or (isinstance(exc, RuntimeError) and "connect" in said.lower()):
        return f"Temporal cannot be reached ({said})"
    return f"it could not be sent ({type(exc).__name__}: {said})"


async def _renewing(claim: Any) -> None:
    while True:
        await asyncio.sleep(holds.CLAIM_STALE_SECONDS / 4)
        holds.renew(claim)


async def send_one(state: Inbox, claim: Any, held: holds.Held) -> None:
    """Send one held answer (claimed) to the gates it has left. A gate that takes it, or
    refuses it for good (FINAL_REFUSALS), is settled; one that could not be reached or has
    not taken it now is kept and tried again later (holds.again), and the person is told
    what holds it up. Once nothing is left, one line says how it went."""
    from vicar.client.gates import answer_gates
    from vicar.inbox.accounts import load_user

    data_dir = state.settings.data_dir
    held.total = held.total or len(held.gates)
    sent, failed, later = 0, [], {}  # later: workflow id -> why it is to be tried again
    renewing = asyncio.ensure_future(_renewing(claim))  # a long batch keeps its claim
    try:
        acct = load_user(data_dir, held.account)
        if acct is None:
            raise VicarError(f"the account {held.account!r} is gone")
        allowed = []
        for wid, principal in held.gates.items():
            why_not = refusal_for(state, acct, principal)
            if why_not:
                failed.append(f"{wid}: {why_not}")
            else:
                allowed.append(wid)
        ans = HumanAnswer(action=held.action, text=held.text, responder=acct.name, ask_first=held.ask_first)
        try:
            client = await client_as(state, acct.name)  # one connection for the whole batch
            outcomes = await answer_gates(client, allowed, ans) if allowed else []
        except Exception as exc:  # noqa: BLE001  (no gate was reached: all of them later)
            outcomes = [exc] * len(allowed)
            client = None
        for wid, got in zip(allowed, outcomes):
            if isinstance(got, Conflict) and client is not None and await _has_it(client, wid, ans):
                sent += 1  # an earlier try of this very answer got through
            elif isinstance(got, FINAL_REFUSALS):
                failed.append(f"{wid}: {got}")
            elif isinstance(got, BaseException):
                later[wid] = _why_later(got)
            else:
                sent += 1
        if later:
            state.clients.pop(acct.name, None)  # the next try connects afresh
    except VicarError as exc:  # the account is gone: nothing of it can be sent, ever
        failed += [f"{wid}: {exc}" for wid in held.gates]
    except Exception as exc:  # noqa: BLE001  (unforeseen: tried again, never dropped)
        log.exception("inbox: sending a held answer of %s failed; it is kept and tried again", held.account)
        later = {wid: _why_later(exc) for wid in held.gates}
        sent, failed = 0, []
    finally:
        renewing.cancel()
    held.sent += sent
    held.failed += failed
    if later:
        why = "; ".join(dict.fromkeys(later.values()))
        told = held.waiting == why
        held.tries += 1
        held.gates = {w: held.gates[w] for w in later}
        held.waiting = why
        holds.again(claim, held)
        if not told:  # said once per reason, not at every try
            log.warning("inbox: a held answer of %s is kept to be sent again: %s", held.account, why[:500])
            holds.tell(
                data_dir,
                held.account,
                held.id,
                f"not taken yet: {held.label()} · {why}. It is kept and sent again until its gate takes it "
                "or refuses it; it can no longer be undone",
                ok=False,
            )
        return
    if held.total == 1 and held.sent:
        said = f"sent: {held.label()}"
    else:
        said = f"sent: {held.action} {held.sent} of {held.total}" + (
            f" · not sent: {'; '.join(held.failed)}" if held.failed else ""
        )
    if held.failed:
        log.warning("inbox: a held answer of %s was not sent: %s", held.account, "; ".join(held.failed)[:500])
    holds.settle(data_dir, claim, held, said, ok=not held.failed)


def _sent(task: asyncio.Task, sending: set[asyncio.Task]) -> None:
    sending.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        # Its claim stays behind and goes stale: the answer is tried again, not lost.
        log.error("inbox: a held answer's send failed (%s: %s); it is tried again later", type(exc).__name__, exc)


async def sender(state: Inbox) -> None:
    """Runs beside the app: held answers go out when their window closes (each in its
    own task, so a batch of a thousand does not hold up another person's one answer),
    those left by a stopped server as soon as it starts again, those kept after a try
    that did not reach their gates when their next try is due. On shutdown the sends
    under way get SHUTDOWN_SECONDS to finish; one cut short is sent again by the next
    inbox (its claim goes stale), and the gate refuses what it already has."""
    sending: set[asyncio.Task] = set()
    try:
        while True:
            try:
                for claim, held in holds.claim_due(state.settings.data_dir):
                    task = asyncio.ensure_future(send_one(state, claim, held))
                    sending.add(task)
                    task.add_done_callback(lambda t: _sent(t, sending))
            except Exception:  # noqa: BLE001  (the loop must outlive a bad file or a blip)
                log.exception("inbox: sending held answers failed; trying again")
            await asyncio.sleep(SEND_EVERY)
    finally:
        if sending:
            await asyncio.wait(list(sending), timeout=SHUTDOWN_SECONDS)
