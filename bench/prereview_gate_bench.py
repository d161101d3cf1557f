"""What the pre-review adds to a gate at a memory of 10k chunks (issue 27, goal: <= 10 ms p50).

    VICAR_DATA_DIR=/tmp/a-data python -m bench.prereview_gate_bench \\
        ../shared/datasets/gate-replay/dev/git-whats-cooking.jsonl.gz --chunks 10000 --gates 100

One principal's memory holds the first --chunks human answers of the reviewer with the
most events (recorded as a gate records them; kept in the data dir and reused by a later
run). Then, on the embedded Temporal dev server with the worker in-process (the default,
learned, predictor): the floor (an empty workflow and one of the gate's shape, 4 no-op
local activities), and --gates real gates on the reviewer's next events, sequential,
escalation_mode=never, each event twice back to back, with the pre-review and without
(the order alternating; off: the ranking the predictors' answer is built from, `rank`,
returns no items and the posterior's similar-work search finds none, so the gate carries
no pre-review and the answer keeps the predictor's own text). The added cost is the
median of the paired differences (and the difference of the two p50s); the ranking's
and the search's own times inside the gates are timed too. With a warm
embedding cache (VICAR_DATA_DIR of an earlier replay) the gates skip the embedding a new
artifact pays for; that cost is the same with and without the pre-review.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from temporalio.worker import Worker

from bench.floor_workflow import FloorWorkflow, noop
from bench.gate_common import BENCH_ENV, GATE_LOCAL_ACTIVITIES, Row, phase_progress
from bench.gate_floor import baseline
from bench.machine_info import command_line, machine_line
from vicar.client.gates import start_gate
from vicar.eval.dataset import load_events, principal_for
from vicar.memory.embedder import make_embedder
from vicar.memory.registry import MemoryRegistry
from vicar.models import AnsweredBy, EscalationMode, GateRequest, OutcomeRecord, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy import answer_words, retrieval
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.select import predictor_from_env
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client

WARMUP = 6  # gates before the clock: the learned model's first fit at the pin, caches


def fill(registry: MemoryRegistry, principal: str, events, chunks: int, console: Console) -> None:
    memory = registry.get(principal)
    have = memory.size()
    if have >= chunks:
        console.print(f"memory of {principal}: {have} chunks (reused)")
        return
    t0 = time.perf_counter()
    for n, e in enumerate(events[:chunks], 1):
        if n <= have:
            continue
        request = e.request(principal)
        record = OutcomeRecord(
            request=request,
            n=n,
            workflow_id=f"fill/{request.gate_id}",
            action=e.action,
            response_text=e.response,
            answered_by=AnsweredBy.human,
            responder=e.reviewer,
        )
        record_outcome(memory, record, artifacts=False)
        memory.raise_counter(n)
        if n % 1000 == 0:
            console.print(f"  {n} chunks, {time.perf_counter() - t0:.0f} s")
    console.print(f"memory of {principal}: {memory.size()} chunks, filled in {time.perf_counter() - t0:.0f} s")


def ms(xs: list[float], q: int = 50) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] * 1000 if len(xs) > 1 else xs[0] * 1000


async def bench(args: argparse.Namespace, console: Console) -> str:
    os.environ.update(BENCH_ENV)
    settings = Settings.from_env()
    by_reviewer = load_events([args.file])
    reviewer = max(by_reviewer, key=lambda r: len(by_reviewer[r]))
    events = by_reviewer[reviewer]
    if len(events) < args.chunks + WARMUP + args.gates:
        sys.exit(f"{reviewer} has {len(events)} events: fewer than --chunks + {WARMUP} + --gates")
    principal = principal_for(reviewer) + "-gatebench"
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    fill(registry, principal, events, args.chunks, console)

    real = answer_words.rank
    calls: list[float] = []
    on = True

    def switched(
        ctx: RetrievalContext, request: GateRequest, artifact: str, *args: Any, **kw: Any
    ) -> list[PreReviewItem]:
        if not on:
            return []
        t0 = time.perf_counter()
        out = real(ctx, request, artifact, *args, **kw)
        calls.append(time.perf_counter() - t0)
        return out

    answer_words.rank = switched  # the offline and learned predictors' one ranking per gate
    real_similar = retrieval.similar_work
    searches: list[float] = []

    def similar_switched(*a, **kw):
        if not on:
            return []
        t0 = time.perf_counter()
        out = real_similar(*a, **kw)
        searches.append(time.perf_counter() - t0)
        return out

    retrieval.similar_work = similar_switched  # the posterior's search for the pre-review's similar work
    rows = {True: Row("gate with the pre-review"), False: Row("gate without the pre-review")}
    run = uuid.uuid4().hex[:6]
    diffs: list[float] = []
    sizes: dict[bool, list[int]] = {True: [], False: []}
    t_start = time.perf_counter()
    async with temporal_client(settings, embedded=True) as (client, _server):
        gate_worker, _ = build_worker(
            client,
            settings,
            task_queue="bench-gates",
            registry=registry,
            predictor=predictor_from_env(settings, registry),
        )
        floor_worker = Worker(
            client,
            task_queue="bench-floor",
            workflows=[FloorWorkflow],
            activities=[noop],
            activity_executor=ThreadPoolExecutor(max_workers=2),
        )
        async with gate_worker, floor_worker:
            with phase_progress(console) as progress:
                empty = await baseline(client, "bench-floor", args.gates, 0, "empty workflow (floor)", progress)
                shape = await baseline(
                    client,
                    "bench-floor",
                    args.gates,
                    GATE_LOCAL_ACTIVITIES,
                    f"workflow with {GATE_LOCAL_ACTIVITIES} no-op local activities (floor)",
                    progress,
                )
                bar = progress.add_task("gates, each event with and without", total=2 * (WARMUP + args.gates))
                for i, e in enumerate(events[args.chunks : args.chunks + WARMUP + args.gates]):
                    pair = {}
                    # The same event twice, back to back, the order alternating: a paired difference.
                    for on in (i % 2 == 0, i % 2 != 0):
                        req = e.request(principal).model_copy(
                            update={"gate_id": f"bench-{run}-{i}-{int(on)}", "escalation_mode": EscalationMode.never}
                        )
                        t0 = time.perf_counter()
                        result = await (await start_gate(client, req, "bench-gates")).result()
                        pair[on] = time.perf_counter() - t0
                        if i >= WARMUP:
                            row = rows[on]
                            row.total += 1
                            row.latencies.append(pair[on])
                            row.escalated += result.escalated
                            sizes[on].append(len(result.model_dump_json()))
                        progress.advance(bar)
                    if i >= WARMUP:
                        diffs.append(pair[True] - pair[False])
    size = registry.get(principal).size()
    registry.close()
    with_, without = rows[True], rows[False]
    added = ms(with_.latencies) - ms(without.latencies)
    paired = ms(diffs)
    measured = calls[WARMUP:]
    lines = [
        "# The pre-review's cost in a gate (bench/prereview_gate_bench.py)",
        "",
        f"- command: `{command_line()}`",
        f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"- machine: {machine_line()}",
        f"- memory: {size} chunks at the end ({args.chunks} before the gates) of {reviewer} "
        f"(principal {principal}); run time {time.perf_counter() - t_start:.0f} s",
        "",
        "| measurement | gates | p50 ms | p90 ms | mean ms |",
        "|---|---|---|---|---|",
    ]
    for row in (empty, shape, without, with_):
        lines.append(
            f"| {row.label} | {len(row.latencies)} | {ms(row.latencies):.1f} | {ms(row.latencies, 90):.1f} | "
            f"{statistics.fmean(row.latencies) * 1000:.1f} |"
        )
    lines += [
        "",
        f"- added by the pre-review, the median of the {len(diffs)} paired differences (the same event with "
        f"and without): {paired:+.1f} ms (quartiles {ms(diffs, 25):+.1f} / {ms(diffs, 75):+.1f}; goal <= 10 ms: "
        f"{'met' if paired <= 10 else 'NOT met'}); p50 with - p50 without: {added:+.1f} ms",
        f"- the gate's result as JSON: {statistics.fmean(sizes[True]):.0f} bytes with the items, "
        f"{statistics.fmean(sizes[False]):.0f} without (mean)",
        f"- the ranking (`rank`, the pre-review's work) inside those gates: {len(measured)} calls, "
        f"p50 {ms(measured):.2f} ms, "
        f"p90 {ms(measured, 90):.2f} ms, max {max(measured) * 1000:.2f} ms",
        f"- the similar-work search (`similar_work`, the posterior's one more search of the memory) inside "
        f"those gates: {len(searches[WARMUP:])} calls, p50 {ms(searches[WARMUP:]):.2f} ms, "
        f"p90 {ms(searches[WARMUP:], 90):.2f} ms",
        f"- the gate without it over the gate's-shape floor: {ms(without.latencies) - ms(shape.latencies):+.1f} ms p50",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", type=Path)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--gates", type=int, default=100, help="measured events, each gated with and without")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    console = Console()
    text = asyncio.run(bench(args, console))
    console.print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
