"""`vicar health`: what holds Vicar's ids in Temporal, approval-rate trends, the autonomy
rule's state and the trust ledger."""

from __future__ import annotations

import typer
from rich.text import Text

from vicar.cli.base import app, console, folded_table, friendly
from vicar.cli.memory_cmd import open_store
from vicar.display import text
from vicar.errors import NotFound
from vicar.memory.names import child_path
from vicar.settings import Settings


@app.command()
@friendly
def health(principal: str = typer.Argument(..., help="The human whose answers to look at.")) -> None:
    """Pauses and rules in force; approval-rate trends per context over the latest sessions, drops flagged."""
    from vicar.models import OutcomeRecord
    from vicar.proxy.autonomy.checked import context_errors, store_labels
    from vicar.proxy.autonomy.rule import target_rule_states
    from vicar.proxy.bookkeeping import ContextEntry
    from vicar.proxy.control_store import kept_control
    from vicar.proxy.health import (
        DROP,
        SESSIONS,
        autonomy_rules,
        context_health,
        control_lines,
        known_principals,
        rule_lines,
    )
    from vicar.proxy.outcome_log import context_entries, ledger_rows
    from vicar.proxy.trust import ledger

    settings = Settings.from_env()
    try:
        with open_store(principal) as store:
            records = [OutcomeRecord.model_validate_json(r) for _, r in store.outcomes(answered_by="human")]
            entries = [ContextEntry.model_validate_json(e) for _, e in context_entries(store)]
            rules = autonomy_rules(
                store,
                child_path(settings.principals_dir, principal),
                settings.calibration.autonomy,
                sorted({(e.state, e.task_type) for e in entries}),
                settings.calibration.recalibration_window,
            )
            errs = context_errors(
                store_labels(store, child_path(settings.principals_dir, principal), settings.calibration.autonomy)
            )
            targets = target_rule_states(
                store, child_path(settings.principals_dir, principal), settings.calibration.autonomy
            )
            agents = ledger(*ledger_rows(store))
            control = kept_control(store)
    except NotFound as exc:
        # No memory yet: what holds its ids in Temporal is still worth saying (a squatted
        # brain id keeps a new principal from ever having one).
        for line, style in temporal_lines(settings, principal):
            console.print(text(line, style))
        raise NotFound(f"{exc}; {known_principals(settings.principals_dir)}") from None
    # After the memory is read: a store that cannot be read is the one line said.
    for line, style in temporal_lines(settings, principal):
        console.print(text(line, style))
    for line in control_lines(principal, control):
        console.print(text(line, "bold red" if line.startswith("Paused") else ""))
    ema = {(e.state, e.task_type): e.ema_approval_rate for e in entries}
    rows = context_health(records, ema)
    if not rows:
        console.print(text(f"No human answers recorded for {principal} yet."))
        return
    table = folded_table(
        f"Approval rate of {principal}, latest {SESSIONS} sessions per context (oldest first)",
        ("state", "task type", "human answers", "answered by", "sessions", "approval rate per session", "EMA", "trend"),
    )
    for h in rows:
        trend = text("" if h.earlier is None else f"{h.earlier:.2f} -> {h.later:.2f}")
        if h.flagged:
            trend = text(f"DROP {trend}", "bold red")
        table.add_row(
            text(h.state),
            text(h.task_type),
            str(h.human_answers),
            text(", ".join(f"{who} {k}" for who, k in h.responders.items())),
            str(len(h.sessions)),
            " ".join(f"{r:.2f}" for r in h.approval_rates),
            "" if h.ema_approval_rate is None else f"{h.ema_approval_rate:.2f}",
            trend,
        )
    console.print(table)
    table = folded_table(
        f"Autonomy rule of {principal}: evidence pooled over every gate, parameters per state",
        ("state", "task type", "target error", "acts alone from", "error bound", "evidence", "errors", "audit share"),
    )
    for (state, task_type), r in rules.items():
        table.add_row(
            text(state),
            text(task_type),
            f"{r.target:g}",
            "none" if r.threshold is None else f"{100 * (r.threshold_shown or r.threshold):.0f}% sure",
            f"{r.bound:.3f}",
            str(r.evidence),
            str(r.errors),
            f"{r.audit_share:g}",
        )
    console.print(table)
    for line in rule_lines(rules):  # the demo's footer says the same, from the same function
        console.print(text(line))
    for line in target_lines(targets):
        console.print(text(line))
    error_lines(errs)
    if agents:
        table = folded_table(
            f"Trust ledger of the upstream agents at {principal}'s gates (least trusted first)",
            ("agent", "approved", "corrected", "rejected", "other", "answered alone", "overrides", "regret", "trust"),
        )
        for t in agents:
            table.add_row(
                text(t.agent),
                str(t.approvals),
                str(t.corrections),
                str(t.rejections),
                str(t.other),
                str(t.alone),
                str(t.overrides),
                str(t.regrets),
                f"{t.score:.2f}",
            )
        console.print(table)
    flagged = [h for h in rows if h.flagged]
    if flagged:
        console.print(
            Text.assemble(
                text(f"{len(flagged)} context(s) dropped by >= {DROP:.1f} in approval rate:", "bold red"),
                " ",
                text(", ".join(f"{h.state}/{h.task_type}" for h in flagged)),
            )
        )


def temporal_lines(settings: Settings, principal: str) -> list[tuple[str, str]]:
    """What Temporal says of the principal's brain id and of Vicar's gate ids, when one
    of them is held by a workflow that is not Vicar's (vicar.client.squatters): each
    line with its style. Temporal out of reach is one line; the rest of the report does
    not need it."""
    import asyncio

    from temporalio.service import RPCError

    from vicar.client.squatters import GATE_IDS_SHOWN, brain_squatter, gate_squatters
    from vicar.errors import VicarError
    from vicar.models import check_principal
    from vicar.runtime.connect import connect

    check_principal(principal)

    async def look() -> tuple[str | None, list[str]]:
        client = await connect(settings, timeout=5)
        return await brain_squatter(client, principal, settings.task_queue), await gate_squatters(
            client, settings.task_queue
        )

    try:
        brain, gates = asyncio.run(look())
    except (VicarError, RPCError) as exc:
        said = " ".join(str(exc).split())[:300]
        return [(f"Temporal was not asked whether {principal}'s brain and the gate ids are free: {said}", "yellow")]
    lines = [(brain, "bold red")] if brain else []
    if gates:
        more = " (the first ones)" if len(gates) >= GATE_IDS_SHOWN else ""
        lines.append((f"Gate ids that cannot be used for their gate{more}: a start with such an id is refused", "red"))
        lines += [(f"  {g}", "red") for g in gates]
    return lines


def error_lines(rows) -> None:
    """Where the proxy errs: the pooled statement can hold while a context runs above
    its target; the checked answers per context show it (vicar.proxy.autonomy.checked)."""
    from vicar.proxy.autonomy.checked import summary

    console.print(
        text(
            "Where the proxy errs: its answers given alone that were checked later (random audits, reviews), "
            "per task type and target (the rule above is pooled over every state and task type):",
            "bold",
        )
    )
    for r in rows:
        console.print(text(f"  {r.line()}", "bold red" if r.clearly_above else "red" if r.above else ""))
    console.print(text(summary(rows), "bold red" if any(r.above for r in rows) else ""))


def target_lines(targets) -> list[str]:
    """The person's target rules, each with what its own bound proves over the gates it
    matches; a gate it matches is answered alone only where this and the pooled rule hold."""
    from vicar.models.control import describe
    from vicar.proxy.health import rule_statement

    return [
        f"Target rule {rule.name} (target {rule.target:g} where {describe(rule)}; both it and the pooled rule "
        f"must hold): {rule_statement(own, over=f'the gates rule {rule.name} matches')}"
        for rule, own in targets
    ]
