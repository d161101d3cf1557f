"""Gate latency and throughput with the default (learned, local) predictor on the embedded Temporal dev server.

    python -m bench.gate_bench [--gates N] [--principals 8] [--out bench/RESULTS.md]

Phases, all in one process against one embedded server with the worker in-process (so
eager workflow start applies):
  1. baselines, eager start + result, sequentially: an empty workflow, and one that runs
     as many no-op local activities as a gate (Temporal's floor for the gate's shape);
     then concurrently, as many gates over as many principals as phase 5 (each principal
     a sequential stream): the same two, and a floor gate that also takes and gives back
     a turn on a per-principal no-op brain like a real gate (Temporal's throughput floor
     for the gate with the brain's turn protocol; bench/floor_workflow.py);
  2. training: every principal gets `docs` gates answered by a scripted human until the
     proxy decides alone (these gates are also the gate path's warm-up);
  3. latency: N sequential gates (round-robin over the principals), escalation_mode
     when_unsure; only the ones the proxy decided alone count;
  4. the same with escalation_mode=never (the full proxy path, never a human);
  5. throughput: ceil(N / principals) gates per principal, all principals concurrently;
  6. burst: --burst gates started at once over the principals, with the server's count of
     RESOURCE_EXHAUSTED answers (Temporal's in-flight update limit) during it;
  7. durability: phases 3 and 5 again with the memory store at synchronous=FULL and at
     NORMAL, interleaved (bench/durability.py): the cost of durable commits;
  8. the gate against its floor: --rounds rounds of the full floor gate and phase 5,
     alternating (floor, gate, gate, floor, ...), so a shared machine's load drift falls
     on both alike; the ratio the goal reads is their median per round.
Results go to a markdown report (--out) as well as the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import math
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from temporalio.client import Client
from temporalio.worker import Worker

from bench.durability import direct_record, durability, filesystem_of, server_floors
from bench.durability import report_lines as durability_lines
from bench.floor_workflow import (
    FloorBrainActivities,
    FloorBrainWorkflow,
    FloorGateWorkflow,
    FloorWorkflow,
    noop,
)
from bench.gate_common import (
    BENCH_ENV,
    GATE_LOCAL_ACTIVITIES,
    MAX_TRAINING_GATES,
    MEASURE_POLL,
    ActivityTimer,
    Row,
    breakdown,
    cpu_seconds,
    eagerly_started,
    phase_progress,
    proxy_parts,
)
from bench.gate_floor import FloorGate, baseline, concurrent_baseline
from bench.gate_report import HEADERS, anatomy, report, table_rows
from bench.prom import delta, resource_exhausted, server_metrics_url
from vicar import contracts as c
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.memory.embedder import default_embedder
from vicar.models import CfAState, EscalationMode, GateRequest, GateResult, GateStatus, HumanAnswer
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client

TASK_TYPE = "docs"
QUESTION = "Approve or revise the overall deliverable: documentation update."
HUMAN = HumanAnswer(action="approve", text="Fine, ship it.", responder="bench")
# The proxy must decide alone this many times in a row before a principal counts as trained.
TRAINED_STREAK = 2
# A gate slower than this is stuck: fail loudly rather than hang the benchmark.
GATE_TIMEOUT = 120.0
ARTIFACT_NUMBERS = itertools.count(1)


async def metered(server_pid: int | None, phase: Awaitable[Row]) -> Row:
    """Run a phase and charge it the CPU this process (client + worker + activities) and
    the server used: on 2 cores that, not waiting, is what bounds throughput."""
    pids: list[int | str] = ["self", server_pid if server_pid is not None else -1]
    before = [cpu_seconds(p) for p in pids]
    row = await phase
    after = [cpu_seconds(p) for p in pids]
    row.cpu = (after[0] - before[0], after[1] - before[1])
    return row


def gate(principal: str, run: str, i: int, mode: EscalationMode = EscalationMode.when_unsure) -> GateRequest:
    # A number never used before in this run: the embedder caches by text, and a repeated
    # artifact would skip the embedding a real gate pays for.
    return GateRequest(
        principal=principal,
        gate_id=f"bench-{run}-{principal}-{mode.value}-{i}",
        state=CfAState.WORK_ASSERT,
        task_type=TASK_TYPE,
        question=QUESTION,
        escalation_mode=mode,
        artifact_text=f"Fix typo number {next(ARTIFACT_NUMBERS)} in the installation guide.",
    )


async def run_gate(
    client: Client, req: GateRequest, tq: str, poll: float | None, timeout: float = GATE_TIMEOUT
) -> tuple[GateResult, float, bool]:
    """Start a gate and wait for its result, answering as the human if it escalates.
    Checks for escalation only every `poll` seconds (None: never, for gates that cannot
    escalate): each query costs the worker and the server work that would slow the gates
    being measured, and one of a workflow no longer cached replays its whole history."""
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            handle = await start_gate(client, req, tq)
            result = asyncio.ensure_future(handle.result())
            while not (await asyncio.wait({result}, timeout=poll))[0]:
                details = await gate_details(client, req.gate_id)
                if details is not None and details.status is GateStatus.escalated:
                    await answer_gate(client, req.gate_id, HUMAN)
                    break
            res = await result
    except TimeoutError:
        raise RuntimeError(
            f"gate {req.gate_id} did not finish in {timeout:.0f} s; see its history "
            f"(workflow {c.gate_workflow_id(req.gate_id)})"
        ) from None
    return res, time.perf_counter() - t0, eagerly_started(handle)


def record(row: Row, res: GateResult, seconds: float, eager: bool) -> None:
    row.total += 1
    row.eager += eager
    if res.escalated:
        row.escalated += 1
    else:
        row.latencies.append(seconds)
        row.ids.append(res.gate_id)


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


async def sequential(
    client: Client,
    tq: str,
    principals: list[str],
    run: str,
    n: int,
    mode: EscalationMode,
    label: str,
    progress: Progress,
) -> Row:
    row = Row(label)
    bar = progress.add_task(label, total=n)
    for i in range(n):
        req = gate(principals[i % len(principals)], run, i, mode)
        record(row, *await run_gate(client, req, tq, poll=MEASURE_POLL))
        progress.advance(bar)
    return row


async def concurrent(client: Client, tq: str, principals: list[str], run: str, per: int, progress: Progress) -> Row:
    # escalation_mode=never: every gate runs the whole proxy path and none waits for the
    # scripted human, so the figure is the proxy's throughput, not the human's 3 s delay.
    row = Row(f"gates (escalation_mode=never), {len(principals)} principals concurrently")
    bar = progress.add_task(row.label, total=per * len(principals))

    async def stream(p: str) -> None:
        for i in range(per):
            record(row, *await run_gate(client, gate(p, run + "c", i, EscalationMode.never), tq, poll=None))
            progress.advance(bar)

    t0 = time.perf_counter()
    await asyncio.gather(*(stream(p) for p in principals))
    row.wall = time.perf_counter() - t0
    return row


async def burst(client: Client, tq: str, principals: list[str], run: str, count: int, progress: Progress) -> Row:
    """`count` gates started at once, spread over the principals: many take_turn requests
    in flight to each brain together (Temporal admits 10 in-flight updates per workflow)."""
    row = Row(f"{count} gates at once (escalation_mode=never), {len(principals)} principals")
    bar = progress.add_task(row.label, total=count)

    async def one(i: int) -> None:
        # Queued behind up to count / principals others of the same principal: no poll
        # (a never gate cannot escalate) and a timeout for the whole burst.
        record(
            row,
            *await run_gate(
                client,
                gate(principals[i % len(principals)], run + "b", i, EscalationMode.never),
                tq,
                poll=None,
                timeout=GATE_TIMEOUT * max(1, count // len(principals)),
            ),
        )
        progress.advance(bar)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    row.wall = time.perf_counter() - t0
    return row


async def against_floor(
    client: Client, principals: list[str], run: str, per: int, rounds: int, progress: Progress
) -> list[tuple[float, float]]:
    """(full floor gates/s, gates/s) per round, the order alternating between rounds."""
    out = []
    for r in range(rounds):
        rates: dict[str, float] = {}
        for which in ("floor", "gate") if r % 2 == 0 else ("gate", "floor"):
            if which == "floor":
                row = await concurrent_baseline(
                    client, "bench-floor", principals, run, per, FloorGate(full=True), f"floor, round {r + 1}", progress
                )
            else:
                row = await concurrent(client, "bench-gates", principals, f"{run}i{r}", per, progress)
            rates[which] = row.rate or math.nan
        out.append((rates["floor"], rates["gate"]))
    return out


def proxy_work(settings: Settings, registry, predictor, principals: list[str], per: int) -> float:
    """CPU ms per gate of the proxy's own work with no Temporal at all: what the gate's
    local activities do (pin the learned model, consult, record the outcome), called
    directly, for `per` gates of each of `principals` (fresh ones: their own memories),
    after the same kind of training (human answers) as the gates had. Run in one thread
    with nothing else running; thread CPU time, so the event loop's idling is not counted."""
    from vicar.models import Action, AnsweredBy, OutcomeRecord
    from vicar.proxy.consult import consult
    from vicar.proxy.outcomes import record_outcome

    def one(p: str, i: int, human: bool) -> None:
        req = gate(p, "direct", i, EscalationMode.when_unsure if human else EscalationMode.never)
        memory = registry.get(p)
        n = memory.counter() + 1
        memory.raise_counter(n)
        model = predictor.pin(p) if predictor.pin else None
        with predictor.using(p, model) if predictor.using else contextlib.nullcontext(predictor) as pred:
            res = consult(memory, pred, req, n, settings, now=dt.datetime.now(dt.UTC), gate_key=req.gate_id)
        record_outcome(
            memory,
            OutcomeRecord(
                request=req,
                n=n,
                workflow_id=f"direct/{req.gate_id}",
                action=Action.approve if human else (res.posterior.action or Action.approve),
                response_text=HUMAN.text if human else res.posterior.prose,
                responder="bench" if human else None,
                answered_by=AnsweredBy.human if human else AnsweredBy.proxy,
                prior=res.prior,
                posterior=res.posterior,
                surprise=res.surprise,
                at=dt.datetime.now(dt.UTC),
                calibration=res.calibration,
            ),
        )

    for p in principals:
        for i in range(TRAINED_STREAK + 3):
            one(p, i, human=True)
    t0 = time.thread_time()
    for i in range(per):
        for p in principals:
            one(p, 100 + i, human=False)
    return (time.thread_time() - t0) * 1000 / (per * len(principals))


async def bench(args: argparse.Namespace, console: Console) -> str:
    t_start = time.perf_counter()
    os.environ.update(BENCH_ENV, VICAR_DATA_DIR=tempfile.mkdtemp(prefix="vicar-bench-"))
    settings = Settings.from_env()
    run = uuid.uuid4().hex[:6]
    principals = [f"bench-p{i}" for i in range(args.principals)]
    timer = ActivityTimer()
    load_before = os.getloadavg()[0]
    async with temporal_client(settings, embedded=True) as (base_client, server):
        await asyncio.to_thread(default_embedder)  # load the model before the clock runs
        config = base_client.config()
        config["interceptors"] = [timer]
        client = Client(**config)
        embedder, registry, predictor = proxy_parts(settings)
        gate_worker, _ = build_worker(
            client, settings, task_queue="bench-gates", registry=registry, predictor=predictor
        )
        floor_worker = Worker(
            client,
            task_queue="bench-floor",
            workflows=[FloorWorkflow, FloorBrainWorkflow, FloorGateWorkflow],
            activities=[noop, *FloorBrainActivities(client).all()],
            activity_executor=ThreadPoolExecutor(max_workers=4),
        )
        setup_s = time.perf_counter() - t_start
        server_pid = server.pid if server else None
        console.print(
            f"server {server.address if server else '?'}, data dir {settings.data_dir}, setup {setup_s:.1f} s"
        )
        try:
            async with gate_worker, floor_worker:
                with phase_progress(console) as progress:
                    floor_n = max(args.gates, 50)
                    base = await metered(
                        server_pid, baseline(client, "bench-floor", floor_n, 0, "empty workflow (baseline)", progress)
                    )
                    shape = await metered(
                        server_pid,
                        baseline(
                            client,
                            "bench-floor",
                            floor_n,
                            GATE_LOCAL_ACTIVITIES,
                            f"workflow with {GATE_LOCAL_ACTIVITIES} no-op local activities (baseline)",
                            progress,
                        ),
                    )
                    per = math.ceil(args.gates / args.principals)
                    c_rows = []
                    shapes: list[tuple[int | FloorGate, str]] = [
                        (0, "empty workflow"),
                        (GATE_LOCAL_ACTIVITIES, f"{GATE_LOCAL_ACTIVITIES} no-op local activities"),
                        (FloorGate(full=False), "floor gate (brain turn, 2 no-op LAs)"),
                        (FloorGate(full=True), "full floor gate (brain turn, pin + 2 no-op LAs, search attributes)"),
                    ]
                    for shape_, label in shapes:
                        label = f"{label}, {args.principals} principals concurrently (baseline)"
                        # Warm-up, not measured: starts the floor brains, warms the paths.
                        await concurrent_baseline(
                            client, "bench-floor", principals, run, 2, shape_, "warm-up: " + label, progress
                        )
                        c_rows.append(
                            await metered(
                                server_pid,
                                concurrent_baseline(
                                    client, "bench-floor", principals, run, per, shape_, label, progress
                                ),
                            )
                        )
                    c_base, c_shape, c_brain, c_full = c_rows
                    trained = await train(client, "bench-gates", principals, run, progress)
                    direct_ms = await asyncio.to_thread(
                        proxy_work,
                        settings,
                        registry,
                        predictor,
                        [f"bench-direct-p{i}" for i in range(args.principals)],
                        per,
                    )

                    def in_sequence(suffix: str, mode: EscalationMode, label: str) -> Awaitable[Row]:
                        return metered(
                            server_pid,
                            sequential(
                                client, "bench-gates", principals, run + suffix, args.gates, mode, label, progress
                            ),
                        )

                    timer.enabled = True  # the activity breakdown is of the autonomous gates alone
                    alone = await in_sequence(
                        "a", EscalationMode.when_unsure, "autonomous gate (when_unsure), sequential"
                    )
                    timer.enabled = False
                    never = await in_sequence("n", EscalationMode.never, "gate, escalation_mode=never, sequential")
                    conc = await metered(server_pid, concurrent(client, "bench-gates", principals, run, per, progress))
                    metrics_url = server_metrics_url(settings.data_dir)
                    exhausted_before = resource_exhausted(metrics_url)
                    bursting = await metered(
                        server_pid, burst(client, "bench-gates", principals, run, args.burst, progress)
                    )
                    exhausted = delta(exhausted_before, resource_exhausted(metrics_url))
                    rounds = await against_floor(client, principals, run, per, args.rounds, progress)
                    durable = await durability(
                        client,
                        registry,
                        timer,
                        principals,
                        run,
                        args.gates,
                        per,
                        progress,
                        sequential,
                        concurrent,
                        EscalationMode.when_unsure,
                    )
                    direct_durable = await asyncio.to_thread(
                        direct_record, settings.principals_dir, embedder, settings.memory, args.gates
                    )
                    floors_durable = await server_floors(
                        settings.data_dir, args.gates, GATE_LOCAL_ACTIVITIES, baseline, progress
                    )
            gate_anatomy = await anatomy(client, alone)
        finally:
            registry.close()
    rows = [base, shape, c_base, c_shape, c_brain, c_full, alone, never, conc, bursting]
    acts = breakdown(timer, max(alone.total, 1))
    table = Table(title="Vicar gate benchmark")
    for h in HEADERS:
        table.add_column(h, no_wrap=True)
    for cells in table_rows(rows):
        table.add_row(*cells)
    console.print(table)
    text = report(
        args,
        rows,
        trained,
        acts,
        gate_anatomy,
        (load_before, os.getloadavg()[0]),
        setup_s,
        time.perf_counter() - t_start,
        exhausted,
        direct_ms,
        rounds,
    )
    return (
        text
        + "\n"
        + "\n".join(
            durability_lines(
                durable,
                direct_durable,
                floors_durable,
                shape.pct(50),
                c_full.rate or math.nan,
                str(settings.data_dir),
                filesystem_of(str(settings.data_dir)),
            )
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=100, help="gates per measured phase (default 100)")
    ap.add_argument("--principals", type=int, default=8, help="concurrent principals (default 8)")
    ap.add_argument("--burst", type=int, default=200, help="gates started at once in the last phase (default 200)")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds of floor and gate (default 4)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "RESULTS.md")
    args = ap.parse_args()
    console = Console() if sys.stdout.isatty() else Console(width=160)  # keep the table readable in logs
    text = asyncio.run(bench(args, console))
    args.out.write_text(text)
    console.print(text.split("## Goals", 1)[1].split("## Where", 1)[0].strip())
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    main()
