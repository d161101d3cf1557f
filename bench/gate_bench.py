"""Gate latency and throughput with the offline predictor on the embedded Temporal dev server.

    python bench/gate_bench.py [--gates N] [--principals 8] [--out bench/RESULTS.md]

Phases, all in one process against one embedded server with the worker in-process (so
eager workflow start applies):
  1. baseline: an empty workflow, eager start + result, sequentially;
  2. training: every principal gets `docs` gates answered by a scripted human until the
     proxy decides alone (these gates are also the gate path's warm-up);
  3. latency: N sequential gates (round-robin over the principals), escalation_mode
     when_unsure; only the ones the proxy decided alone count;
  4. the same with escalation_mode=never (the full proxy path, never a human);
  5. throughput: ceil(N / principals) gates per principal, all principals concurrently.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import temporalio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from temporalio.client import Client, WorkflowHandle
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Worker
from temporalio.worker import Interceptor as WorkerInterceptor

from empty_workflow import EmptyWorkflow  # bench/ is sys.path[0] when run as a script
from memory.embedder import default_embedder
from vicar.config import Settings
from vicar.gates import answer_gate, gate_details, start_gate
from vicar.models import CfAState, EscalationMode, GateRequest, GateResult, GateStatus, HumanAnswer
from worker import build_worker, temporal_client

P50_GOAL_MS = 150.0
THROUGHPUT_GOAL = 20.0
TASK_TYPE = "docs"
QUESTION = "Approve or revise the overall deliverable: documentation update."
HUMAN = HumanAnswer(action="approve", text="Fine, ship it.")
# The proxy must decide alone this many times in a row before a principal counts as trained.
TRAINED_STREAK = 2
MAX_TRAINING_GATES = 12
BASELINE_WARMUP = 10


class ActivityTimer(ClientInterceptor, WorkerInterceptor):
    """Wall time per activity name (local ones included), to show where a gate's time goes.
    On the client so the worker built from it picks it up: build_worker takes no interceptors."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.enabled = False

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        timer = self

        class Timed(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                t0 = time.perf_counter()
                try:
                    return await self.next.execute_activity(input)
                finally:
                    if timer.enabled:
                        timer.samples[input.fn.__name__].append(time.perf_counter() - t0)

        return Timed(next)


@dataclass
class Row:
    label: str
    latencies: list[float] = field(default_factory=list)  # seconds, counted gates only
    escalated: int = 0
    eager: int = 0
    total: int = 0
    wall: float | None = None  # seconds, throughput phase only

    def pct(self, q: float) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000 if len(
            self.latencies) > 1 else self.mean

    @property
    def mean(self) -> float:
        return statistics.fmean(self.latencies) * 1000 if self.latencies else math.nan

    @property
    def rate(self) -> float | None:
        return self.total / self.wall if self.wall else None


def eagerly_started(handle: WorkflowHandle) -> bool:
    # Private SDK flag; the bench only reports it, so a missing one reads as False.
    return bool(getattr(handle, "__temporal_eagerly_started", False))


def gate(principal: str, run: str, i: int, mode: EscalationMode = EscalationMode.when_unsure) -> GateRequest:
    return GateRequest(
        principal=principal, gate_id=f"bench-{run}-{principal}-{mode.value}-{i}", state=CfAState.WORK_ASSERT,
        task_type=TASK_TYPE, question=QUESTION, escalation_mode=mode,
        artifact_text=f"Fix typo number {i} in the installation guide.",
    )


async def run_gate(client: Client, req: GateRequest, tq: str, poll: float) -> tuple[GateResult, float, bool]:
    """Start a gate and wait for its result, answering as the human if it escalates.
    Polls for escalation only every `poll` seconds: queries cost workflow tasks, which
    would slow the gates being measured."""
    t0 = time.perf_counter()
    handle = await start_gate(client, req, tq)
    result = asyncio.ensure_future(handle.result())
    while not (await asyncio.wait({result}, timeout=poll))[0]:
        details = await gate_details(client, req.gate_id)
        if details is not None and details.status is GateStatus.escalated:
            await answer_gate(client, req.gate_id, HUMAN)
            break
    res = await result
    return res, time.perf_counter() - t0, eagerly_started(handle)


def record(row: Row, res: GateResult, seconds: float, eager: bool) -> None:
    row.total += 1
    row.eager += eager
    if res.escalated:
        row.escalated += 1
    else:
        row.latencies.append(seconds)


async def baseline(client: Client, tq: str, n: int, progress: Progress) -> Row:
    row = Row("empty workflow (baseline)")
    bar = progress.add_task("baseline: empty workflow", total=BASELINE_WARMUP + n)
    for i in range(BASELINE_WARMUP + n):
        t0 = time.perf_counter()
        handle = await client.start_workflow(
            EmptyWorkflow.run, id=f"bench-empty-{uuid.uuid4().hex}", task_queue=tq, request_eager_start=True)
        await handle.result()
        if i >= BASELINE_WARMUP:
            row.total += 1
            row.eager += eagerly_started(handle)
            row.latencies.append(time.perf_counter() - t0)
        progress.advance(bar)
    return row


async def train(client: Client, tq: str, principals: list[str], run: str, progress: Progress) -> dict[str, int]:
    """Human answers each principal needed before the proxy decided alone (-1: never trained)."""
    bar = progress.add_task("training principals", total=len(principals))

    async def one(p: str) -> int:
        streak = answered = 0
        for i in range(MAX_TRAINING_GATES):
            res, _, _ = await run_gate(client, gate(p, run + "t", i), tq, poll=0.05)
            answered += res.escalated
            streak = 0 if res.escalated else streak + 1
            if streak >= TRAINED_STREAK:
                progress.advance(bar)
                return answered
        progress.advance(bar)
        return -1

    return dict(zip(principals, await asyncio.gather(*(one(p) for p in principals))))


async def sequential(client: Client, tq: str, principals: list[str], run: str, n: int,
                     mode: EscalationMode, label: str, progress: Progress) -> Row:
    row = Row(label)
    bar = progress.add_task(label, total=n)
    for i in range(n):
        req = gate(principals[i % len(principals)], run, i, mode)
        record(row, *await run_gate(client, req, tq, poll=1.0))
        progress.advance(bar)
    return row


async def concurrent(client: Client, tq: str, principals: list[str], run: str, per: int,
                     progress: Progress) -> Row:
    row = Row(f"{len(principals)} principals concurrently")
    bar = progress.add_task(row.label, total=per * len(principals))

    async def stream(p: str) -> None:
        for i in range(per):
            record(row, *await run_gate(client, gate(p, run + "c", i), tq, poll=1.0))
            progress.advance(bar)

    t0 = time.perf_counter()
    await asyncio.gather(*(stream(p) for p in principals))
    row.wall = time.perf_counter() - t0
    return row


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    return (f"nproc {len(os.sched_getaffinity(0))} ({cpu}), Python {platform.python_version()}, "
            f"temporalio {temporalio.__version__}, {platform.system()} {platform.release()}")


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table_rows(rows: list[Row]) -> list[list[str]]:
    return [[r.label, str(len(r.latencies)), f"{r.escalated}/{r.total}", f"{r.eager}/{r.total}",
             fmt(r.pct(50)), fmt(r.pct(95)), fmt(r.mean), fmt(r.rate)] for r in rows]


HEADERS = ["measurement", "counted", "escalated", "eager start", "p50 ms", "p95 ms", "mean ms", "gates/s"]


def breakdown(timer: ActivityTimer, gates: int) -> list[tuple[str, float, int]]:
    """(activity, mean ms per counted gate, calls) for the sequential when_unsure phase."""
    return sorted(((name, sum(v) * 1000 / gates, len(v)) for name, v in timer.samples.items()),
                  key=lambda t: -t[1])


def report(args: argparse.Namespace, rows: list[Row], trained: dict[str, int], acts: list[tuple[str, float, int]],
           setup_s: float, total_s: float) -> str:
    base, alone, never, conc = rows
    p50 = alone.pct(50)
    lines = [
        "# Vicar gate benchmark",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {machine()}",
        "- setup: offline predictor, embedded Temporal dev server (`temporal server start-dev`, SQLite file), "
        "worker in-process, fresh data dir",
        f"- run time: {total_s:.0f} s (server start + model load {setup_s:.1f} s)",
        f"- training: human answers needed per principal before the proxy decided alone: "
        f"{', '.join(str(v) for v in trained.values())} (-1 = not trained in {MAX_TRAINING_GATES} gates)",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *("| " + " | ".join(cells) + " |" for cells in table_rows(rows)),
        "",
        "Latency is `start_gate` (eager start) to `handle.result()` returning; only gates the proxy "
        "decided alone (`escalated == False`) are counted. Escalated gates were answered by the bench "
        "as the human and left out. The `never` row runs the same proxy path but can never wait for "
        "a human. gates/s = all gates of the concurrent phase / its wall time.",
        "",
        "## Goals",
        "",
        f"- autonomous gate p50 <= {P50_GOAL_MS:.0f} ms: {fmt(p50)} ms — "
        f"**{'met' if p50 <= P50_GOAL_MS else 'NOT met'}**",
        f"- >= {THROUGHPUT_GOAL:.0f} gates/s over {args.principals} concurrent principals: {fmt(conc.rate)} gates/s — "
        f"**{'met' if (conc.rate or 0) >= THROUGHPUT_GOAL else 'NOT met'}**",
        "",
        "## Temporal's floor",
        "",
        f"- empty workflow round trip p50 {fmt(base.pct(50))} ms = "
        f"{fmt(100 * base.pct(50) / p50, '.0f')}% of the autonomous gate's p50 ({fmt(p50)} ms); "
        f"the gate is {fmt(p50 / base.pct(50), '.1f')}x the floor.",
        f"- under load ({args.principals} principals): gate p50 {fmt(conc.pct(50))} ms, "
        f"{fmt(conc.pct(50) / base.pct(50), '.1f')}x the floor.",
        "",
        "## Where a sequential autonomous gate's time goes (activity wall time, mean per gate)",
        "",
        "| activity | ms per gate | calls |",
        "|---|---|---|",
        *(f"| {name} | {ms:.1f} | {calls} |" for name, ms, calls in acts),
        f"| **sum of activities** | {sum(ms for _, ms, _ in acts):.1f} | |",
        f"| gate mean latency | {fmt(alone.mean)} | |",
        "",
        "The rest (gate mean minus the activity sum) is Temporal and SDK overhead: start, workflow "
        "tasks, the result long-poll. `request_turn` is itself a Temporal round trip "
        "(update-with-start on the principal's brain workflow).",
        "",
    ]
    return "\n".join(lines)


async def bench(args: argparse.Namespace, console: Console) -> str:
    t_start = time.perf_counter()
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="vicar-bench-")))
    run = uuid.uuid4().hex[:6]
    principals = [f"bench-p{i}" for i in range(args.principals)]
    timer = ActivityTimer()
    async with temporal_client(settings, embedded=True) as (base_client, server):
        await asyncio.to_thread(default_embedder)  # load the model before the clock runs
        client = Client(**{**base_client.config(), "interceptors": [timer]})
        gate_worker, registry = build_worker(client, settings, task_queue="bench-gates")
        empty_worker = Worker(client, task_queue="bench-empty", workflows=[EmptyWorkflow])
        setup_s = time.perf_counter() - t_start
        console.print(f"server {server.address if server else '?'}, data dir {settings.data_dir}, "
                      f"setup {setup_s:.1f} s")
        try:
            async with gate_worker, empty_worker:
                with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=console) as progress:
                    base = await baseline(client, "bench-empty", max(args.gates, 50), progress)
                    trained = await train(client, "bench-gates", principals, run, progress)
                    timer.enabled = True
                    alone = await sequential(client, "bench-gates", principals, run + "a", args.gates,
                                             EscalationMode.when_unsure, "autonomous gate (when_unsure)", progress)
                    timer.enabled = False
                    never = await sequential(client, "bench-gates", principals, run + "n", args.gates,
                                             EscalationMode.never, "gate, escalation_mode=never", progress)
                    conc = await concurrent(client, "bench-gates", principals, run,
                                            math.ceil(args.gates / args.principals), progress)
        finally:
            registry.close()
    rows = [base, alone, never, conc]
    acts = breakdown(timer, max(alone.total, 1))
    table = Table(title="Vicar gate benchmark")
    for h in HEADERS:
        table.add_column(h, no_wrap=True)
    for cells in table_rows(rows):
        table.add_row(*cells)
    console.print(table)
    return report(args, rows, trained, acts, setup_s, time.perf_counter() - t_start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=100, help="gates per measured phase (default 100)")
    ap.add_argument("--principals", type=int, default=8, help="concurrent principals (default 8)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "RESULTS.md")
    args = ap.parse_args()
    console = Console()
    text = asyncio.run(bench(args, console))
    args.out.write_text(text)
    console.print(text.split("## Goals", 1)[1].split("## Where", 1)[0].strip())
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    main()
