"""`vicar audit export` and `vicar review` (docs/audit.md): the audit trail read, and an
autonomous answer judged, from any machine that reaches Temporal. The records stay in
each principal's memory on its worker; these commands reach them through small
workflows (workflows/audit.py), sealed by the payload codec on the way."""

from __future__ import annotations

import asyncio
import csv
import sys
from datetime import UTC, datetime
from enum import Enum
from typing import Optional

import typer

from vicar.cli.base import OUTPUT, Output, app, console, err, friendly, open_client
from vicar.display import text
from vicar.errors import InvalidInput
from vicar.models.audit import DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES, MIN_PAGE_BYTES
from vicar.settings import Settings

audit_app = typer.Typer(no_args_is_help=True, help="The audit trail: one record per gate, from any machine.")
app.add_typer(audit_app, name="audit")


class Format(str, Enum):
    jsonl = "jsonl"
    csv = "csv"


def parse_since(value: str | None) -> datetime | None:
    """An ISO date or time; one without a zone is UTC."""
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"invalid --since {value[:80]!r}: an ISO date or time, e.g. 2026-11-25T17:00:00Z") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


@audit_app.command("export")
@friendly
def audit_export(
    principal: Optional[str] = typer.Option(None, "--principal", help="Only this principal (default: every one)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only gates answered at or after this ISO time."),
    output: Format = typer.Option(Format.jsonl, "-o", "--output", help="jsonl: one JSON record a line; csv."),
    page_bytes: int = typer.Option(
        DEFAULT_PAGE_BYTES, min=MIN_PAGE_BYTES, max=MAX_PAGE_BYTES, help="The most each page carries through Temporal."
    ),
) -> None:
    """Every gate's record (answered, answered alone, timed out) to stdout, oldest first
    per principal; progress on stderr."""
    from vicar.models import check_principal

    if principal is not None:
        check_principal(principal)
    asyncio.run(_export(Settings.from_env(), principal, parse_since(since), output, page_bytes))


async def _export(settings: Settings, principal: str | None, since, output: Format, page_bytes: int) -> None:
    from vicar.client.audit import audit_pages, audited_principals
    from vicar.errors import NotFound
    from vicar.models.audit import csv_columns
    from vicar.proxy.autonomy.checked import context_errors, record_labels

    client = await open_client(settings)
    principals = [principal] if principal else await audited_principals(client, settings.task_queue)
    writer = csv.DictWriter(sys.stdout, fieldnames=csv_columns()) if output is Format.csv else None
    if writer:
        writer.writeheader()
    total = 0
    for p in principals:
        pages, count = 0, 0
        labels: list = []
        try:
            async for page in audit_pages(
                client, p, since=since, page_bytes=page_bytes, task_queue=settings.task_queue
            ):
                pages += 1
                labels += record_labels(page.records)
                for r in page.records:
                    if writer:
                        writer.writerow(r.csv_row())
                    else:
                        sys.stdout.write(r.model_dump_json() + "\n")
                count += len(page.records)
                sys.stdout.flush()
                if sys.stderr.isatty():
                    err.print(text(f"{p}: {count} records ..."), end="\r")
        except NotFound as exc:
            if principal:
                raise
            err.print(text(f"skipped {p}: {exc}"))
            continue
        total += count
        err.print(text(f"{p}: {count} records in {pages} pages"))
        errors_of(p, context_errors(labels))
    if not principal:
        err.print(text(f"{total} records of {len(principals)} principals"))


def errors_of(principal: str, rows) -> None:
    """Where the proxy errs, over the records exported (the figures `vicar health` and the
    inbox show): on stderr, so stdout stays one record a line."""
    from vicar.proxy.autonomy.checked import summary

    if not rows:
        return
    err.print(
        text(
            f"{principal}: realized error of the answers given alone and checked later (audits, reviews) in these "
            "records, per task type and target (the autonomy rule's bound is pooled over every state and task type):"
        )
    )
    for r in rows:
        err.print(text(f"{principal}: {r.line()}"))
    err.print(text(f"{principal}: {summary(rows)}"))


@app.command()
@friendly
def review(
    gate: str = typer.Argument(..., help="The gate id, or the workflow id the gate was started under."),
    verdict: str = typer.Argument(..., help="wrong | right: was the proxy's answer the principal's?"),
    note: str = typer.Option("", "--note", help="Why (kept with the review, sent with `overruled`)."),
    reviewer: Optional[str] = typer.Option(
        None,
        "--reviewer",
        envvar="VICAR_RESPONDER",
        show_default="$VICAR_RESPONDER, else your OS user name",
        help="Who reviews: recorded, and checked against the principal's allow-list.",
    ),
    principal: Optional[str] = typer.Option(
        None, "--principal", help="The gate's principal, for a gate Temporal no longer holds."
    ),
    output: Output = OUTPUT,
) -> None:
    """Judge an answer the proxy gave alone: counts as an audit label; `wrong` tells the
    orchestrator (webhook event `overruled`) so it can undo. One review per gate."""
    from vicar.models import check_principal
    from vicar.models.audit import ReviewRequest

    if verdict not in ("wrong", "right"):
        raise InvalidInput(f"invalid verdict {verdict[:40]!r}: wrong or right")
    if reviewer is None:
        import getpass

        try:
            reviewer = getpass.getuser()
        except (OSError, KeyError):
            raise InvalidInput("cannot tell who is reviewing: give --reviewer or set VICAR_RESPONDER") from None
    if principal is not None:
        check_principal(principal)
    # Checked before connecting: a bad name or note is one line even with no server.
    ReviewRequest(principal=principal or "x", gate_workflow_id=gate, verdict=verdict, reviewer=reviewer, note=note)
    asyncio.run(_review(Settings.from_env(), gate, verdict, note, reviewer, principal, output))


async def _review(settings: Settings, gate: str, verdict: str, note: str, reviewer: str, principal, output) -> None:
    from vicar.client.audit import review_gate

    client = await open_client(settings)
    result = await review_gate(
        client, gate, verdict, reviewer, note=note, principal=principal, task_queue=settings.task_queue
    )
    if output is Output.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    told = "; the orchestrator is told (overruled)" if verdict == "wrong" and not result.why else ""
    said = "recorded" if result.new else "already recorded"
    gate_wid = result.review.gate_workflow_id if result.review else gate
    console.print(text(f"{said}: {gate_wid} reviewed {verdict} by {reviewer}{told}"))
    if result.why:
        err.print(text(result.why))
