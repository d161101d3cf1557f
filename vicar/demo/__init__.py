"""`vicar demo`: a scripted session on the embedded default.

A scripted orchestrator opens gates in waves (one gate per task type, concurrently);
the proxy predicts; escalated gates are answered by a scripted human through the
`respond` update; later waves find the human's answers in memory.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.display import text
from vicar.models import SURPRISE_DELTA, CfAState, GateDetails, GateRequest, GateResult, GateStatus, HumanAnswer
from vicar.proxy.reasons import ReasonFacts, reason_words


@dataclass(frozen=True)
class Kind:
    task_type: str
    state: CfAState
    question: str
    artifacts: tuple[str, ...]


# What the orchestrator's agents produce, per task type, wave after wave.
KINDS: tuple[Kind, ...] = (
    Kind(
        "docs",
        CfAState.WORK_ASSERT,
        "Approve or revise the overall deliverable: documentation update.",
        (
            "Docs: fix typos in the installation guide.",
            "Docs: fix broken links in the installation guide.",
            "Docs: clarify the installation guide's proxy section.",
            "Docs: fix typos in the configuration guide.",
            "Docs: update the installation guide for the new release.",
            "Docs: fix a broken link in the installation guide.",
        ),
    ),
    Kind(
        "dependency-bump",
        CfAState.WORK_ASSERT,
        "Approve or revise the overall deliverable: dependency bump.",
        (
            "Bump requests from 2.31 to 2.32 (patch release, CI green).",
            "Bump urllib3 from 2.2.1 to 2.2.2 (patch release, CI green).",
            "Bump pydantic from 2.7.0 to 2.7.1 (patch release, CI green).",
            "Bump numpy from 2.0.0 to 2.0.1 (patch release, CI green).",
            "Bump rich from 13.7.0 to 13.7.1 (patch release, CI green).",
            "Bump typer from 0.12.3 to 0.12.4 (patch release, CI green).",
        ),
    ),
    Kind(
        "db-migration",
        CfAState.PLAN_ASSERT,
        "Approve or revise the proposed plan: database migration.",
        (
            "Plan: add a nullable column last_login to users. No rollback step.",
            "Plan: add an index on orders.created_at. Rollback: drop the index.",
            "Plan: rename column users.name to users.full_name. No rollback step.",
            "Plan: add a nullable column archived to projects. Rollback: drop the column.",
            "Plan: drop the unused table legacy_sessions. No rollback step.",
            "Plan: add an index on users.email. Rollback: drop the index.",
        ),
    ),
    Kind(
        "api-change",
        CfAState.PLAN_ASSERT,
        "Approve or revise the proposed plan: public API change.",
        (
            "Plan: add an optional `limit` parameter to GET /projects.",
            "Plan: add an optional `cursor` parameter to GET /projects.",
            "Plan: add an optional `sort` parameter to GET /projects.",
            "Plan: add an optional `fields` parameter to GET /projects.",
            "Plan: remove the `owner` field from GET /projects (breaking change).",
            "Plan: add an optional `filter` parameter to GET /projects.",
        ),
    ),
)


# The demo's autonomy rule. The product's default (5% error at delta 0.05, valid whenever
# read) needs about 100 agreeing human answers before the proxy acts alone, more than a
# demo's few waves give; so the demo's principal asks a looser 40% at 80% confidence, in
# its own autonomy.json, the way any principal can be given its own rule.
DEMO_AUTONOMY = '{"target_error": 0.4, "delta": 0.2}'


def demo_autonomy(principal_dir: Path) -> str:
    """Give the demo's principal its rule (unless it has one already); what to tell the user."""
    from vicar.proxy.autonomy.rule import AUTONOMY_FILE

    path = principal_dir / AUTONOMY_FILE
    if path.exists():
        return f"Autonomy rule: {path} (kept)."
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DEMO_AUTONOMY + "\n")
    return (
        f"Autonomy rule for this demo: the proxy answers alone once its error is proven <= 40% "
        f"(at 80% confidence, whenever read), set in {path}. Vicar's default is 5% at 95%, which takes "
        f"about 100 agreeing human answers first."
    )


DEMO_PRINCIPAL = "alice"


def claim_principal(principals_dir: Path, wanted: str | None) -> tuple[str, str]:
    """The demo's principal and what to tell the user about it.

    Named, not random, so `vicar health alice` is what a reader types next. A later demo
    in the same data directory must not start from an earlier one's memory (its first
    wave would not escalate and the table would teach nothing): the default takes the
    first free name of alice, alice-2, alice-3... A free name is claimed by creating its
    directory (mkdir is atomic), so two demos started together never share one. A name
    given with --principal is used as it is, earlier memory included, and said so."""
    from vicar.memory.names import child_path

    if wanted is not None:
        used = (child_path(principals_dir, wanted) / "memory.db").exists()
        return wanted, (
            f"Principal {wanted}: it has a memory from an earlier run here, and the proxy starts from it."
            if used
            else f"Principal {wanted}."
        )
    principals_dir.mkdir(parents=True, exist_ok=True)
    for k in range(1, 10_000):
        name = DEMO_PRINCIPAL if k == 1 else f"{DEMO_PRINCIPAL}-{k}"
        try:
            child_path(principals_dir, name).mkdir()
        except FileExistsError:
            continue
        if k == 1:
            return name, f"Principal {name}: the human whose answers the proxy learns (an empty memory)."
        taken = f"{DEMO_PRINCIPAL} has" if k == 2 else f"{DEMO_PRINCIPAL} to {DEMO_PRINCIPAL}-{k - 1} have"
        return name, (
            f"Principal {name}: {taken} a memory here from earlier runs, so this run starts from an "
            f"empty one under a new name (`vicar demo --principal {DEMO_PRINCIPAL}` continues the first "
            f"instead; a fresh VICAR_DATA_DIR starts over)."
        )
    raise FileExistsError(f"{principals_dir}: no free demo principal name")


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
            batch.append(
                GateRequest(
                    principal=principal,
                    gate_id=f"demo-{run_id}-{i + 1:03d}",
                    state=kind.state,
                    task_type=kind.task_type,
                    question=kind.question,
                    artifact_text=kind.artifacts[wave % len(kind.artifacts)],
                    actor_message=f"Finished the {kind.task_type} step; please review.",
                )
            )
            i += 1
        waves.append(batch)
        wave += 1
    return waves


class DemoSummary(BaseModel):
    results: list[GateResult]
    seconds: float
    memory_chunks: int
    memory_human: int
    escalations: dict[str, GateDetails] = {}  # by gate id: what an escalated gate showed the human
    rule_lines: list[str] = []  # the autonomy rule's state at the end, as `vicar health` says it
    wrong_alone: int = 0  # answers the proxy gave alone that the scripted human would not have given

    @property
    def autonomous(self) -> int:
        return sum(not r.escalated for r in self.results)


async def run_gate(
    client, req: GateRequest, task_queue: str, human_delay: float
) -> tuple[GateResult, GateDetails | None]:
    """The gate's result and, when it escalated, what it showed the human then (the
    proxy's guess in words and why it did not answer alone)."""
    handle = await start_gate(client, req, task_queue)
    result_task = asyncio.ensure_future(handle.result())
    escalated = None
    while not result_task.done():
        details = await gate_details(client, req.gate_id)
        if details is not None and details.status is GateStatus.escalated:
            escalated = details
            await asyncio.sleep(human_delay)  # the human reads the question
            answer = scripted_human(req)
            answer.responder = req.principal
            await answer_gate(client, req.gate_id, answer)
            break
        await asyncio.wait([result_task], timeout=0.1)
    return await result_task, escalated


async def run_demo(
    client,
    principal: str,
    gates: int,
    task_queue: str,
    registry,
    console: Console,
    human_delay: float = 0.2,
    settings=None,
) -> DemoSummary:
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"  # gate ids are unique per namespace
    waves = scenario(principal, gates, run_id)
    results: list[GateResult] = []
    escalations: dict[str, GateDetails] = {}
    if settings is None:
        from vicar.settings import Settings

        settings = Settings.from_env()
    start = time.monotonic()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("gates", total=gates)
        for w, wave in enumerate(waves, 1):
            progress.update(bar, description=f"wave {w}/{len(waves)}")

            async def one(req: GateRequest) -> GateResult:
                r, shown = await run_gate(client, req, task_queue, human_delay)
                if shown is not None:
                    escalations[r.gate_id] = shown
                progress.advance(bar)
                return r

            results.extend(await asyncio.gather(*(one(r) for r in wave)))
    seconds = time.monotonic() - start
    stats, rules = await asyncio.to_thread(final_state, registry.get(principal), settings)
    results.sort(key=lambda r: r.n)
    asked = {req.gate_id: req for wave in waves for req in wave}
    return DemoSummary(
        wrong_alone=sum(not r.escalated and r.action.value != scripted_human(asked[r.gate_id]).action for r in results),
        results=results,
        seconds=seconds,
        memory_chunks=stats.chunks,
        memory_human=stats.human_answered,
        escalations=escalations,
        rule_lines=rules,
    )


def final_state(memory, settings) -> tuple:
    """The memory's size, and the autonomy rule now that every answer is graded: the same
    function and words as `vicar health` (not the rule the last gate was consulted under,
    which predates its wave's answers)."""
    from vicar.proxy.bookkeeping import ContextEntry
    from vicar.proxy.health import autonomy_rules, rule_lines
    from vicar.proxy.outcome_log import context_entries

    contexts = sorted(
        {
            (e.state, e.task_type)
            for e in (ContextEntry.model_validate_json(raw) for _, raw in context_entries(memory.store))
        }
    )
    rules = autonomy_rules(
        memory.store, memory.dir, settings.calibration.autonomy, contexts, settings.calibration.recalibration_window
    )
    return memory.stats(), rule_lines(rules)


# What each guard means, in words a newcomer reads once (vicar.proxy.calibration.GUARDS,
# plus the gate's own reasons; tests/test_demo.py holds this to GUARDS).
GUARD_MEANING = {
    "censor": "a censor learned from the human's repeated corrections fired on the artifact and blocks it",
    "cold_start": "the memory holds answers for too few contexts yet to trust a guess",
    "tension": "the memories the guess rests on disagree with each other",
    "staleness": "the human has not answered in this context for too long to trust the old answers",
    "unsupported": "too few of the human's own answers of this kind of action back the guess "
    "(a new kind, answers that differ, or a kind they marked wrong)",
    "unproven": "the autonomy rule has not proven the proxy accurate enough at this confidence: "
    "no threshold proven yet, or this confidence is below the proven threshold",
    "probation": "the agent that made the artifact is new: the human has not yet answered enough of its work",
    "untrusted": "the agent that made the artifact has a trust score below the floor",
    "audit": "a proven answer all the same sent to the human by the audit share, so evidence keeps coming",
    "proxy_error": "the proxy could not run (its error is in the note)",
    "passthrough": "no guard fired; the gate still asked the human (escalation mode `always`, or the proxy "
    "gave no action or no words)",
}

WORDS = 60  # the proxy's words are clipped to this many characters in the table


def clip(value: str, most: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= most else value[: most - 1] + "…"


def legend(surprise_shown: bool) -> list[str]:
    lines = [
        "N: the gate's place in the principal's sequence of interactions.",
        "gate: the gate's state (INTENT, PLAN or WORK: what the agents ask approval of) and task type.",
        "prior: the proxy's confidence in its guess before it read the artifact (from memory alone).",
        "conf: its confidence after reading the artifact, calibrated (a memory guard caps it).",
        "by: who answered: the proxy alone, or the human after the gate escalated.",
        "action: the answer the agents act on (approve, correct, reject...).",
        f"proxy's words: what the proxy said, or would have said, in the human's voice (first {WORDS} "
        "characters); for an escalated gate its guess, with the action it guessed.",
        "why: for an escalated gate, the guard that sent it to the human (explained below the table).",
    ]
    if surprise_shown:
        lines.append(
            f"surprise: reading the artifact moved the proxy's confidence by more than {SURPRISE_DELTA} "
            "from its prior; the number is how far."
        )
    else:
        lines.append(
            f"No surprise column: reading the artifact never moved the proxy's confidence by more than "
            f"{SURPRISE_DELTA} from its prior (what Vicar calls a surprise) at any of these gates."
        )
    return lines


def proxy_words(r: GateResult, shown: GateDetails | None) -> str:
    if not r.escalated:
        return f"{r.action.value}: {r.text}"
    if shown is None or shown.proxy_action is None:
        return "(no guess)"
    return f"{shown.proxy_action.value}: {shown.proxy_text}"


# A memory as a note names it (vicar.proxy.conflicts): its id, its answer and its place.
_MEMORY = re.compile(r"\bc-[0-9a-f]{8,} \((\w+), N=(\d+)\)")
_MEMORY_ID = re.compile(r"\bc-[0-9a-f]{8,}")


def without_ids(note: str) -> str:
    """A note as a person reads it: each memory by its answer and its place in the
    sequence ("the approve at N 12"), never by its id."""
    note = _MEMORY.sub(lambda m: f"the {m[1]} at N {m[2]}", note).replace("memories the ", "the ")
    return _MEMORY_ID.sub("an earlier answer", note)


def escalation_reason(r: GateResult, shown: GateDetails | None) -> tuple[str, str]:
    """The guard that sent the gate to the human, and why in words with the numbers it
    saw as the detail (vicar.proxy.reasons; memory ids left out)."""
    guard = shown.calibration_guard if shown is not None and shown.calibration_guard else r.calibration_guard
    note = shown.calibration_note if shown is not None and shown.calibration_note else r.calibration_note
    facts = ReasonFacts(
        guard=guard,
        note=note,
        escalated=True,
        confidence=shown.proxy_confidence if shown is not None else r.confidence,
        threshold=shown.autonomy_threshold if shown is not None else None,
        target=shown.autonomy_target if shown is not None else None,
        task_type=r.task_type,
    )
    words = reason_words(facts)
    detail = without_ids(note)
    if words and detail.lower() in words.lower():
        return guard, words  # the words say it all (a support note is its own words)
    return guard, f"{words} ({detail})" if words and detail else words or detail


def render_summary(summary: DemoSummary, console: Console, principal: str, ui_url: str | None = None) -> None:
    surprise_shown = any(r.surprise for r in summary.results)
    table = Table(title=text(f"Vicar demo — principal {principal}"))
    columns = ["N", "gate", "prior", "conf", "by", "action", "proxy's words", "why"]
    for col in columns + (["surprise"] if surprise_shown else []):
        table.add_column(col, no_wrap=col not in ("proxy's words",), overflow="fold")
    for r in summary.results:
        shown = summary.escalations.get(r.gate_id)
        row: list[str | Text] = [
            str(r.n),
            text(f"{r.state.value.removesuffix('_ASSERT')} {r.task_type}"),
            f"{r.prior_confidence:.2f}",
            f"{r.confidence:.2f}",
            "[yellow]human[/]" if r.answered_by.value == "human" else text(r.answered_by.value),
            text(r.action.value),
            text(clip(proxy_words(r, shown), WORDS), one_line=True),
            text(r.calibration_guard if r.escalated else ""),
        ]
        if surprise_shown:
            row.append(f"{r.surprise.magnitude:.2f}" if r.surprise else "")
        table.add_row(*row)
    console.print(table)
    console.print(text("Columns:", "bold"))
    for line in legend(surprise_shown):
        console.print(text(f"  {line}"))
    reasons = {r.n: escalation_reason(r, summary.escalations.get(r.gate_id)) for r in summary.results if r.escalated}
    if reasons:
        console.print(
            text("Why each escalated gate went to the human (the guard, why in words, then what it saw):", "bold")
        )
        for n, (guard, note) in reasons.items():
            console.print(text(f"  N {n}: {guard}" + (f": {note}" if note else "")))
        console.print(text("The guards that fired:", "bold"))
        for guard in dict.fromkeys(g for g, _ in reasons.values()):
            console.print(text(f"  {guard}: {GUARD_MEANING.get(guard, 'a guard this demo does not describe')}."))
    render_words(summary, console)
    n = len(summary.results)
    console.print(
        f"[bold]{n} gates[/] in {summary.seconds:.1f} s: {summary.autonomous} decided by the proxy "
        f"({summary.wrong_alone} of them not what the human would have answered), "
        f"{n - summary.autonomous} escalated to the human. "
        f"Memory: {summary.memory_chunks} chunks ({summary.memory_human} answered by the human)."
    )
    for line in summary.rule_lines:
        console.print(text(line))
    console.print(text(f"(`vicar health {principal}` states the rule the same way, with the approval trends.)"))
    if ui_url:
        console.print(text(f"Temporal UI: {ui_url}/namespaces/default/workflows"))


WORDS_SHOWN = 3  # gates whose words and pre-review are printed in full
ITEMS_SHOWN = 3


def render_words(summary: DemoSummary, console: Console) -> None:
    """For a few gates (those with a pre-review first, the latest of them), the proxy's
    words in full and the person's own past sentences they were built from, each with
    the gate it was said on and the answer it came with."""

    def items(r: GateResult) -> list:
        shown = summary.escalations.get(r.gate_id)
        return r.prereview or (shown.prereview if shown is not None else [])

    worded = [r for r in summary.results if proxy_words(r, summary.escalations.get(r.gate_id)) != "(no guess)"]
    picked = sorted(worded, key=lambda r: (bool(items(r)), r.n), reverse=True)[:WORDS_SHOWN]
    if not picked:
        return
    console.print(text("The proxy's words, and the person's own past words behind them (pre-review):", "bold"))
    for r in sorted(picked, key=lambda r: r.n):
        console.print(
            text(f"  At N {r.n} the proxy said {clip(proxy_words(r, summary.escalations.get(r.gate_id)), 400)}")
        )
        found = items(r)
        for item in found[:ITEMS_SHOWN]:
            source = f"{item.action} on {item.gate_id or 'an earlier gate'}, interaction {item.n}"
            other = f"({note}) " if (note := item.source_note(r.task_type)) else ""
            console.print(text(f"    - {other}{clip(item.text, 200)} ({source})"))
        if not found:
            console.print(text("    (no pre-review: nothing the person said before bears on this gate)"))
