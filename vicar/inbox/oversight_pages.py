"""The person's oversight of their proxy: what it answered alone in their name (each to
mark right or wrong, the after-the-fact review), their rules and the pause switch, and
its autonomy over time. Every change goes the way the CLI sends it; removing a rule asks
first, and an Undo beside the line that says it was removed puts it back."""

from __future__ import annotations

import secrets
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from vicar.errors import Conflict, InvalidInput, NotFound
from vicar.inbox.accounts import Account
from vicar.inbox.render import Point, chart
from vicar.inbox.rule_form import kept, rule_from_form, scope
from vicar.inbox.web import (
    check_workflow_id,
    checked_form,
    client_as,
    inbox,
    not_yours,
    one,
    redirect,
    refusal,
    render,
    signed_in,
)
from vicar.models import check_principal
from vicar.models.audit import AuditRecord
from vicar.models.control import DEFAULT_RULES, Effect
from vicar.models.vocabulary import CfAState

FEED_DAYS = 30  # the feed and the chart read this much of the audit trail
FEED_MOST = 200
CACHE_SECONDS = 15.0  # an audit page is a workflow: the feed and the chart share one read
UNDO_RULE_SECONDS = 300.0  # a removed rule can be put back this long
REMOVED_KEPT = 200  # removed rules kept for their undo, server-wide


async def principals_of(request: Request, acct: Account) -> list[str]:
    """The principals this person answers for: the account's, else every one with a
    brain whose allow-list admits them."""
    from vicar.client.audit import audited_principals

    if acct.principals:
        names = acct.principals
    else:
        names = await audited_principals(inbox(request).client, inbox(request).settings.task_queue)
    return [p for p in names if refusal(request, acct, p) is None]


async def trail(request: Request, principal: str) -> list[AuditRecord]:
    """The principal's records of the last FEED_DAYS, oldest first (cached briefly)."""
    from vicar.client.audit import audit_pages

    cache = inbox(request).trails
    cached = cache.get(principal)
    if cached and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    since = datetime.now(UTC) - timedelta(days=FEED_DAYS)
    records: list[AuditRecord] = []
    try:
        async for page in audit_pages(
            inbox(request).client, principal, since=since, task_queue=inbox(request).settings.task_queue
        ):
            records.extend(page.records)
    except NotFound:
        pass  # no memory yet: nothing answered
    cache[principal] = (time.monotonic(), records)
    return records


def _chosen(request: Request, names: list[str]) -> str | None:
    want = request.query_params.get("principal")
    if want:
        check_principal(want)
        if want not in names:
            raise InvalidInput(f"{want} is not among the principals you answer for")
        return want
    return names[0] if names else None


async def feed(request: Request) -> Response:
    acct = signed_in(request)
    names = await principals_of(request, acct)
    items = []
    for p in names:
        items += [r for r in await trail(request, p) if r.answered_by == "proxy" and not r.escalated]
    items.sort(key=lambda r: r.answered_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return render(request, "feed.html", items=items[:FEED_MOST], total=len(items), principals=names)


async def review(request: Request) -> Response:
    from vicar.client.audit import review_gate

    acct = signed_in(request)
    form = await checked_form(request)
    wid = check_workflow_id(one(form, "workflow_id"))
    verdict = one(form, "verdict")
    if verdict not in ("right", "wrong"):
        raise InvalidInput("a review is right or wrong")
    principal = one(form, "principal")
    check_principal(principal)
    why_not = refusal(request, acct, principal)
    if why_not:
        return not_yours(request, why_not)
    note = one(form, "note").strip()[:2000]
    try:
        result = await review_gate(
            await client_as(inbox(request), acct.name),
            wid,
            verdict,
            acct.name,
            note=note,
            principal=principal,
            task_queue=inbox(request).settings.task_queue,
        )
    except NotFound as exc:  # as a gate not one's own: no oracle of which gates exist
        return not_yours(request, str(exc))
    inbox(request).trails.pop(principal, None)
    what = result.question or wid
    if not result.new:
        said = f"nothing changed: {what} was already marked {result.review.verdict if result.review else verdict}"
    elif verdict == "wrong":
        said = (
            f"marked wrong: {what} · kept in the audit trail with your note, counted against the proxy's error, "
            "and sent to the orchestrator (webhook event overruled) where one is set"
        )
    else:
        said = f"marked right: {what} · kept in the audit trail"
    request.session["flash"] = {"said": said[:300], "ok": True}
    return redirect("/feed")


async def rules(request: Request, failed: dict | None = None, confirm: dict | None = None) -> Response:
    """`failed`: the principal whose add-rule form was refused, its one line and what was
    typed (the page shown again with them, status 400); `confirm`: the rule whose
    removal is asked about (principal, name)."""
    from vicar.client import get_control
    from vicar.models.control import describe

    acct = signed_in(request)
    names = await principals_of(request, acct)
    controls = [(p, await get_control(inbox(request).client, p)) for p in names]
    suggested = {p: await _suggestions(request, p, c) for p, c in controls}
    undo = request.session.get("undo_rule")
    if not isinstance(undo, dict) or time.time() - float(undo.get("at", 0)) > UNDO_RULE_SECONDS:
        request.session.pop("undo_rule", None)
        undo = None
    return render(
        request,
        "rules.html",
        status=400 if failed else 200,
        controls=controls,
        describe=describe,
        failed=failed or {},
        confirm=confirm or {},
        undo=undo,
        states=[s.value for s in CfAState],
        effects=[e.value for e in Effect],
        defaults=DEFAULT_RULES,
        suggested=suggested,
    )


async def _suggestions(request: Request, principal: str, control) -> list:
    """The rules the principal's habits suggest (vicar.proxy.habits), from their trail."""
    from vicar.proxy.habits import suggestions_from_audit

    return suggestions_from_audit(await trail(request, principal), control)


def _keep_removed(request: Request, account: str, principal: str, rule: dict) -> None:
    """The removed rule, kept (server-side) for the Undo beside the line saying so."""
    kept = inbox(request).removed_rules
    while len(kept) >= REMOVED_KEPT:
        kept.pop(next(iter(kept)))
    key = secrets.token_urlsafe(16)
    kept[key] = (account, principal, rule)
    name = rule.get("name", "?")
    request.session["undo_rule"] = {"key": key, "name": name, "principal": principal, "at": time.time()}


async def control(request: Request) -> Response:
    """Add or remove one of a principal's rules, pause their proxy (for everything, a
    state, a task type or both) or lift a pause: the changes the CLI sends."""
    from vicar.client import change_control
    from vicar.models.brain import BrainConfig

    acct = signed_in(request)
    form = await checked_form(request)
    principal = check_principal(one(form, "principal"))
    why_not = refusal(request, acct, principal)
    if why_not:
        return not_yours(request, why_not)
    op = one(form, "op")
    removed: dict | None = None
    restored = ""  # the name of a rule put back
    if op in ("pause", "resume"):
        change: dict = dict(op=op, by=acct.name, **scope(form))
    elif op == "remove_rule":
        name = one(form, "name")
        if one(form, "sure") != "1":  # asked first: a slip of the thumb removes nothing
            return await rules(request, confirm=dict(principal=principal, name=name))
        from vicar.client import get_control

        control = await get_control(inbox(request).client, principal)
        named = control.rule_named(name)  # Vicar's default rules too
        removed = named.model_dump(mode="json") if named is not None else None
        change = dict(op=op, by=acct.name, name=name)
    elif op == "restore_rule":
        kept_rule = inbox(request).removed_rules.get(one(form, "key"))
        if kept_rule is None or kept_rule[0] != acct.name or kept_rule[1] != principal:
            raise InvalidInput("too late to put that rule back: add it again below")
        from vicar.models.default_rules import is_default

        name = restored = str(kept_rule[2].get("name", ""))
        # A default rule comes back by name (it is Vicar's, not re-added as the person's).
        change = (
            dict(op="restore_rule", by=acct.name, name=name)
            if is_default(name)
            else dict(op="add_rule", by=acct.name, rule=kept_rule[2])
        )
    elif op == "restore_default":
        from vicar.models.default_rules import is_default

        name = restored = one(form, "name")
        if not is_default(name):
            raise InvalidInput(f"{name[:70]!r} is not one of Vicar's default rules")
        change = dict(op="restore_rule", by=acct.name, name=name)
    elif op == "accept_suggestion":
        # Recomputed here, never taken from the form: the person accepts what Vicar offers.
        from vicar.client import get_control

        name = one(form, "name")
        inbox(request).trails.pop(principal, None)
        offered = await _suggestions(request, principal, await get_control(inbox(request).client, principal))
        chosen = next((s for s in offered if s.rule.name == name), None)
        if chosen is None:
            raise InvalidInput(f"no suggested rule {name[:70]!r} for {principal} now")
        rule = chosen.rule.model_copy(update={"author": acct.name})
        change = dict(op="add_rule", by=acct.name, rule=rule.model_dump(mode="json"))
        restored = name
    elif op == "add_rule":
        change = dict(op=op, by=acct.name)
    else:
        raise InvalidInput(f"unknown change {op[:40]!r}")
    settings = inbox(request).settings
    config = BrainConfig(shard_count=settings.shard_count, shard_wait_seconds=settings.shard_wait_seconds)
    client = await client_as(inbox(request), acct.name)
    try:
        if op == "add_rule":
            change["rule"] = rule_from_form(form, acct.name).model_dump(mode="json")
        await change_control(client, principal, change, task_queue=settings.task_queue, config=config)
    except (InvalidInput, Conflict) as exc:
        if op != "add_rule":
            raise
        return await rules(request, failed=dict(principal=principal, message=str(exc), form=kept(form)))
    if op == "remove_rule" and removed is not None:
        _keep_removed(request, acct.name, principal, removed)
    elif op == "accept_suggestion":
        request.session["flash"] = {"said": f"your rule now: “{restored}”", "ok": True}
    elif op in ("restore_rule", "restore_default"):
        if op == "restore_rule":
            inbox(request).removed_rules.pop(one(form, "key"), None)
            request.session.pop("undo_rule", None)
        request.session["flash"] = {"said": f"put back: rule “{restored}”", "ok": True}
    return redirect("/rules")


async def health(request: Request) -> Response:
    acct = signed_in(request)
    names = await principals_of(request, acct)
    principal = _chosen(request, names)
    contexts = []
    errs: list = []
    targets: list = []
    if principal:
        from vicar.client import get_control
        from vicar.proxy.autonomy.checked import context_errors, record_labels

        control = await get_control(inbox(request).client, principal)
        targets = [r for r in control.rules if r.effect is Effect.target]

        records = await trail(request, principal)
        errs = context_errors(record_labels(records))  # the figures `vicar health` shows, from the trail
        by_context: dict[tuple[str, str], list[AuditRecord]] = defaultdict(list)
        for r in records:
            if r.kind == "gate" and r.n:
                by_context[(r.state, r.task_type)].append(r)
        for (state, task_type), recs in sorted(by_context.items()):
            recs.sort(key=lambda r: r.n)
            last = recs[-1]
            points = [Point(r.answered_at, r.bound, r.answered_by == "proxy" and not r.escalated) for r in recs]
            contexts.append(
                dict(
                    state=state,
                    task_type=task_type,
                    gates=len(recs),
                    alone=sum(p.alone for p in points),
                    last=last,
                    svg=chart(points, last.target),
                )
            )
    from vicar.models.control import describe
    from vicar.proxy.autonomy.checked import summary

    return render(
        request,
        "health.html",
        principal=principal,
        principals=names,
        contexts=contexts,
        errs=errs,
        errs_summary=summary(errs),
        targets=targets,
        describe=describe,
        feed_days=FEED_DAYS,
    )
