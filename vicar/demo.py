"""`vicar demo`: a scripted session on the embedded default.

A scripted orchestrator opens gates in waves (one gate per task type, concurrently);
the proxy predicts; escalated gates are answered by a scripted human through the
`respond` update; later waves find the human's answers in memory.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vicar.display import text
from vicar.gates import answer_gate, gate_details, start_gate
from vicar.models import CfAState, GateRequest, GateResult, GateStatus, HumanAnswer


@dataclass(frozen=True)
class Kind:
    task_type: str
    state: CfAState
    question: str
    artifacts: tuple[str, ...]


# What the orchestrator's agents produce, per task type, wave after wave.
KINDS: tuple[Kind, ...] = (
    Kind("docs", CfAState.WORK_ASSERT, "Approve or revise the overall deliverable: documentation update.", (
        "Docs: fix typos in the installation guide.",
        "Docs: fix broken links in the installation guide.",
        "Docs: clarify the installation guide's proxy section.",
        "Docs: fix typos in the configuration guide.",
        "Docs: update the installation guide for the new release.",
        "Docs: fix a broken link in the installation guide.",
    )),
    Kind("dependency-bump", CfAState.WORK_ASSERT, "Approve or revise the overall deliverable: dependency bump.", (
        "Bump requests from 2.31 to 2.32 (patch release, CI green).",
        "Bump urllib3 from 2.2.1 to 2.2.2 (patch release, CI green).",
        "Bump pydantic from 2.7.0 to 2.7.1 (patch release, CI green).",
        "Bump numpy from 2.0.0 to 2.0.1 (patch release, CI green).",
        "Bump rich from 13.7.0 to 13.7.1 (patch release, CI green).",
        "Bump typer from 0.12.3 to 0.12.4 (patch release, CI green).",
    )),
    Kind("db-migration", CfAState.PLAN_ASSERT, "Approve or revise the proposed plan: database migration.", (
        "Plan: add a nullable column last_login to users. No rollback step.",
        "Plan: add an index on orders.created_at. Rollback: drop the index.",
        "Plan: rename column users.name to users.full_name. No rollback step.",
        "Plan: add a nullable column archived to projects. Rollback: drop the column.",
        "Plan: drop the unused table legacy_sessions. No rollback step.",
        "Plan: add an index on users.email. Rollback: drop the index.",
    )),
    Kind("api-change", CfAState.PLAN_ASSERT, "Approve or revise the proposed plan: public API change.", (
        "Plan: add an optional `limit` parameter to GET /projects.",
        "Plan: add an optional `cursor` parameter to GET /projects.",
        "Plan: add an optional `sort` parameter to GET /projects.",
        "Plan: add an optional `fields` parameter to GET /projects.",
        "Plan: remove the `owner` field from GET /projects (breaking change).",
        "Plan: add an optional `filter` parameter to GET /projects.",
    )),
)


# The demo's autonomy rule. The product's default (5% error at delta 0.05) needs 59
# agreeing human answers before the proxy acts alone, more than a demo's few waves give;
# so the demo's principal proves a looser 40% (five agreeing answers), in its own
# autonomy.json, the way any principal can be given its own rule.
DEMO_AUTONOMY = '{"target_error": 0.4}'


def demo_autonomy(principal_dir: Path) -> str:
    """Give the demo's principal its rule (unless it has one already); what to tell the user."""
    from vicar.config import AUTONOMY_FILE

    path = principal_dir / AUTONOMY_FILE
    if path.exists():
        return f"Autonomy rule: {path} (kept)."
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DEMO_AUTONOMY + "\n")
    return (f"Autonomy rule for this demo: the proxy answers alone once its error is proven <= 40% "
            f"(at 95% confidence), set in {path}. Vicar's default is 5%, which takes about 59 agreeing "
            f"human answers first.")


def demo_task_queue(principal: str) -> str:
    """A demo's own task queue: its in-process worker is the only one serving it."""
    return f"vicar-demo-{principal}"


def scripted_human(req: GateRequest) -> HumanAnswer:
    """The principal's habits, as the demo's stand-in for a real person."""
    art = req.artifact_text.lower()
    if req.task_type == "db-migration":
        if "rollback:" in art:
            return HumanAnswer(action="approve", text="Approved: the rollback step is clear.")
        return HumanAnswer(action="correct", text="What's the rollback plan if this migration fails halfway?")
    if req.task_type == "api-change":
        if "breaking" in art:
            return HumanAnswer(action="reject", text="No breaking changes without a deprecation cycle.")
        return HumanAnswer(action="approve", text="Looks good; note it in the changelog.")
    if req.task_type == "dependency-bump":
        return HumanAnswer(action="approve", text="Fine for a patch bump with green CI.")
    return HumanAnswer(action="approve", text="Fine, ship it.")


def scenario(principal: str, gates: int, run_id: str) -> list[list[GateRequest]]:
    """Waves of gates, one per task type per wave, `gates` in all."""
    waves: list[list[GateRequest]] = []
    i = 0
    wave = 0
    while i < gates:
        batch = []
        for kind in KINDS:
            if i >= gates:
                break
            batch.append(GateRequest(
                principal=principal, gate_id=f"demo-{run_id}-{i + 1:03d}", state=kind.state,
                task_type=kind.task_type, question=kind.question,
                artifact_text=kind.artifacts[wave % len(kind.artifacts)],
                actor_message=f"Finished the {kind.task_type} step; please review.",
            ))
            i += 1
        waves.append(batch)
        wave += 1
    return waves


class DemoSummary(BaseModel):
    results: list[GateResult]
    seconds: float
    memory_chunks: int
    memory_human: int

    @property
    def autonomous(self) -> int:
        return sum(not r.escalated for r in self.results)


async def run_gate(client, req: GateRequest, task_queue: str, human_delay: float) -> GateResult:
    handle = await start_gate(client, req, task_queue)
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        details = await gate_details(client, req.gate_id)
        if details is not None and details.status is GateStatus.escalated:
            await asyncio.sleep(human_delay)  # the human reads the question
            answer = scripted_human(req)
            answer.responder = req.principal
            await answer_gate(client, req.gate_id, answer)
            break
        await asyncio.wait([result_task], timeout=0.1)
    return await result_task


async def run_demo(client, principal: str, gates: int, task_queue: str, registry, console: Console,
                   human_delay: float = 0.2) -> DemoSummary:
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"  # gate ids are unique per namespace
    waves = scenario(principal, gates, run_id)
    results: list[GateResult] = []
    start = time.monotonic()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        bar = progress.add_task("gates", total=gates)
        for w, wave in enumerate(waves, 1):
            progress.update(bar, description=f"wave {w}/{len(waves)}")

            async def one(req: GateRequest) -> GateResult:
                r = await run_gate(client, req, task_queue, human_delay)
                progress.advance(bar)
                return r

            results.extend(await asyncio.gather(*(one(r) for r in wave)))
    stats = await asyncio.to_thread(lambda: registry.get(principal).stats())
    results.sort(key=lambda r: r.n)
    return DemoSummary(results=results, seconds=time.monotonic() - start,
                       memory_chunks=stats.chunks, memory_human=stats.human_answered)


def render_summary(summary: DemoSummary, console: Console, principal: str, ui_url: str | None) -> None:
    table = Table(title=text(f"Vicar demo — principal {principal}"))
    for col in ("N", "state", "task type", "prior", "conf", "guard", "escalated", "by", "action", "surprise"):
        table.add_column(col, no_wrap=True)
    for r in summary.results:
        table.add_row(
            str(r.n), text(r.state.value.removesuffix("_ASSERT")), text(r.task_type),
            f"{r.prior_confidence:.2f}", f"{r.confidence:.2f}",
            text("" if r.calibration_guard == "passthrough" else r.calibration_guard),
            "[yellow]yes[/]" if r.escalated else "[green]no[/]", text(r.answered_by.value),
            text(r.action.value), "yes" if r.surprise else "",
        )
    console.print(table)
    n = len(summary.results)
    console.print(
        f"[bold]{n} gates[/] in {summary.seconds:.1f} s: {summary.autonomous} decided by the proxy, "
        f"{n - summary.autonomous} escalated to the human. "
        f"Memory: {summary.memory_chunks} chunks ({summary.memory_human} answered by the human)."
    )
    last = summary.results[-1] if summary.results else None
    if last is not None:
        proven = "none proven" if last.autonomy_threshold is None else f"threshold {last.autonomy_threshold:.2f}"
        console.print(text(f"Autonomy rule at the last gate: {proven}, error bound "
                           f"{(last.autonomy_bound if last.autonomy_bound is not None else 1.0):.3f} "
                           f"over {last.autonomy_evidence} human answers."))
    if ui_url:
        console.print(text(f"Temporal UI: {ui_url}/namespaces/default/workflows"))
