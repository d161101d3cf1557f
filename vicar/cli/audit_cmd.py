"""`vicar audit export` and `vicar review` (docs/audit.md): the audit trail read, and an
autonomous answer judged, from any machine that reaches Temporal. The records stay in
each principal's memory on its worker; these commands reach them through small
workflows (workflows/audit.py), sealed by the payload codec on the way."""

from __future__ import annotations

import asyncio
import csv
import sys
import uuid
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Optional

import typer

from vicar import contracts as c
from vicar.audit_models import DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES, MIN_PAGE_BYTES
from vicar.cli.base import OUTPUT, Output, app, console, err, friendly, open_client
from vicar.config import Settings
from vicar.display import text
from vicar.errors import InvalidInput

audit_app = typer.Typer(no_args_is_help=True, help="The audit trail: one record per gate, from any machine.")
app.add_typer(audit_app, name="audit")

# A page's workflow ends within this (its steps retry a few times, then fail with why).
PAGE_TIMEOUT_SECONDS = 600


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


async def _principals(client, task_queue: str) -> list[str]:
    """Every principal with a brain on this deployment's queue, from visibility."""
    from vicar.models import check_principal

    prefix = c.brain_workflow_id("")
    found = set()
    query = f'WorkflowType = "{c.BRAIN_WORKFLOW}" AND TaskQueue = "{task_queue}"'
    async for wf in client.list_workflows(query):
        try:
            found.add(check_principal(wf.id.removeprefix(prefix)))
        except ValueError:
            continue  # not a brain Vicar started
    return sorted(found)


async def _export(settings: Settings, principal: str | None, since, output: Format, page_bytes: int) -> None:
    from vicar.audit_models import AuditCursor, AuditPage, AuditPageRequest, csv_columns
    from vicar.errors import NotFound

    client = await open_client(settings)
    principals = [principal] if principal else await _principals(client, settings.task_queue)
    writer = csv.DictWriter(sys.stdout, fieldnames=csv_columns()) if output is Format.csv else None
    if writer:
        writer.writeheader()
    total = 0
    for p in principals:
        cursor, pages, count = AuditCursor(), 0, 0
        while True:
            req = AuditPageRequest(principal=p, after=cursor, since=since, max_bytes=page_bytes)
            try:
                page: AuditPage = await _page(client, settings, req)
            except NotFound as exc:
                if principal:
                    raise
                err.print(text(f"skipped {p}: {exc}"))
                break
            pages += 1
            for r in page.records:
                if writer:
                    writer.writerow(r.csv_row())
                else:
                    sys.stdout.write(r.model_dump_json() + "\n")
            count += len(page.records)
            sys.stdout.flush()
            if sys.stderr.isatty():
                err.print(text(f"{p}: {count} records ..."), end="\r")
            if page.done:
                break
            cursor = page.cursor
        total += count
        err.print(text(f"{p}: {count} records in {pages} pages"))
    if not principal:
        err.print(text(f"{total} records of {len(principals)} principals"))


async def _page(client, settings: Settings, req):
    from datetime import timedelta

    from temporalio.client import WorkflowFailureError

    from vicar.audit_models import AuditPage
    from vicar.errors import NO_MEMORY, NotFound, VicarError

    try:
        return await client.execute_workflow(
            c.AUDIT_WORKFLOW,
            req,
            id=c.audit_workflow_id(req.principal, uuid.uuid4().hex),
            task_queue=settings.task_queue,
            result_type=AuditPage,
            execution_timeout=timedelta(seconds=PAGE_TIMEOUT_SECONDS),
        )
    except WorkflowFailureError as exc:
        cause: Any = exc.cause
        while getattr(cause, "cause", None) is not None and not getattr(cause, "type", None):
            cause = cause.cause
        message = getattr(cause, "message", None) or str(cause or exc)
        if getattr(cause, "type", None) == NO_MEMORY:
            raise NotFound(message) from None
        raise VicarError(f"the audit trail of {req.principal} cannot be read: {message}") from None


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
    from vicar.audit_models import ReviewRequest
    from vicar.models import check_principal

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
    from vicar.audit_models import ReviewRequest, ReviewResult
    from vicar.errors import Conflict, NotFound, NotReviewable
    from vicar.gates import find_gate
    from vicar.workflows import search_attributes as sa

    client = await open_client(settings)
    try:
        handle, desc = await find_gate(client, gate)
        workflow_id = handle.id
        principal = principal or desc.typed_search_attributes.get(sa.PRINCIPAL)
    except NotFound:
        if principal is None:
            raise NotFound(f"no gate {gate!r} (for a gate Temporal no longer holds, give --principal)") from None
        workflow_id = gate if gate.startswith(c.gate_workflow_id("")) else c.gate_workflow_id(gate)
    if not principal:
        raise NotFound(f"gate {gate!r} names no principal; give --principal")
    req = ReviewRequest(
        principal=principal, gate_workflow_id=workflow_id, verdict=verdict, reviewer=reviewer, note=note
    )
    result: ReviewResult = await client.execute_workflow(
        c.REVIEW_WORKFLOW,
        req,
        id=c.review_workflow_id(uuid.uuid4().hex),
        task_queue=settings.task_queue,
        result_type=ReviewResult,
    )
    if result.refusal == "not_found":
        raise NotFound(result.why)
    if result.refusal == "not_autonomous":
        raise NotReviewable(result.why)
    if result.refusal:
        raise Conflict(result.why)
    if output is Output.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    told = "; the orchestrator is told (overruled)" if verdict == "wrong" else ""
    said = "recorded" if result.new else "already recorded"
    console.print(text(f"{said}: {workflow_id} reviewed {verdict} by {reviewer}{told}"))
    if result.why:
        err.print(text(result.why))
