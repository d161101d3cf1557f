"""The gate's costs under concurrency, separated in one run (issue 39 item 1).

    python -m bench.gate_costs [--principals 4] [--per 12] [--rounds 4] [--out FILE]

One embedded Temporal dev server, the worker in-process. Each round runs, in a rotated
order so a shared machine's load drift falls on all alike:
  - floor: the full floor gate (bench/floor_workflow.py), Temporal's floor for the
    gate's shape;
  - gate: the real gate (escalation_mode=never, as gate_bench's concurrent phase);
  - gate, vectors written at once: Chroma's upsert inside every record, as before the
    write-behind (memory/vectors.py, FLUSH_CHUNKS=1);
  - gate, synchronous=NORMAL: the same with the memory store's commits not fsync'd
    (the cost of durable commits; NOT a shipped mode);
  - gate, no codec: the same through a client and worker whose payloads are not
    sealed (the cost of the codec; NOT a shipped mode).
Every variant runs `per` gates for each of `principals` principals concurrently (each
principal's in turn), and is charged the CPU this process and the server used.
Answer vetting is not measured: it runs only for a human's answer (the `respond`
update), which none of these gates gets.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from temporalio.client import Client
from temporalio.worker import Worker

import vicar.memory.store as store_module
import vicar.memory.vectors as vectors_module
from bench.floor_workflow import FloorBrainActivities, FloorBrainWorkflow, FloorGateWorkflow, FloorWorkflow, noop
from bench.gate_bench import concurrent, metered, train
from bench.gate_common import BENCH_ENV, Row, phase_progress, proxy_parts
from bench.gate_floor import FloorGate, concurrent_baseline
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client

VARIANTS = ("floor", "gate", "gate, vectors written at once", "gate, synchronous=NORMAL", "gate, no codec")


def _durable(registry, principals: list[str], mode: str) -> None:
    """The pragma is set when a store opens: close the memories so the next gate reopens
    them (only on a change: reopening costs more than a phase's gates)."""
    if store_module.DURABLE_SYNCHRONOUS == mode:
        return
    store_module.DURABLE_SYNCHRONOUS = mode
    for p in principals:
        registry.release(p)


async def costs(args: argparse.Namespace, console: Console) -> str:
    t_start = time.perf_counter()
    os.environ.update(BENCH_ENV, VICAR_DATA_DIR=tempfile.mkdtemp(prefix="vicar-costs-"))
    settings = Settings.from_env()
    run = uuid.uuid4().hex[:6]
    sealed_ps = [f"costs-p{i}" for i in range(args.principals)]
    plain_ps = [f"costs-plain-p{i}" for i in range(args.principals)]
    variants = [v for v in VARIANTS if not args.only or v in args.only]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    load = [os.getloadavg()[0]]
    flush_chunks = vectors_module.FLUSH_CHUNKS
    async with temporal_client(settings, embedded=True) as (client, server):
        # Same converter, no codec: payloads leave the process as plain JSON.
        config = client.config()
        config["data_converter"] = dataclasses.replace(client.data_converter, payload_codec=None)
        plain_client = Client(**config)
        _, registry, predictor = proxy_parts(settings)
        sealed_worker, _ = build_worker(
            client, settings, task_queue="costs-gates", registry=registry, predictor=predictor
        )
        plain_worker, _ = build_worker(
            plain_client, settings, task_queue="costs-plain", registry=registry, predictor=predictor
        )
        floor_worker = Worker(
            client,
            task_queue="costs-floor",
            workflows=[FloorWorkflow, FloorBrainWorkflow, FloorGateWorkflow],
            activities=[noop, *FloorBrainActivities(client).all()],
            activity_executor=ThreadPoolExecutor(max_workers=4),
        )
        pid = server.pid if server else None
        try:
            async with sealed_worker, plain_worker, floor_worker:
                with phase_progress(console) as progress:
                    await train(client, "costs-gates", sealed_ps, run, progress)
                    await train(plain_client, "costs-plain", plain_ps, run, progress)
                    full = FloorGate(full=True)
                    await concurrent_baseline(client, "costs-floor", sealed_ps, run, 2, full, "warm-up", progress)

                    def phase(v: str, tag: str):
                        if v == "floor":
                            return concurrent_baseline(
                                client, "costs-floor", sealed_ps, run, args.per, full, f"{v} {tag}", progress
                            )
                        if v == "gate, no codec":
                            return concurrent(plain_client, "costs-plain", plain_ps, run + tag, args.per, progress)
                        return concurrent(client, "costs-gates", sealed_ps, run + tag, args.per, progress)

                    for r in range(args.rounds + 1):  # round 0 warms every path up, unmeasured
                        order = variants[r % len(variants) :] + variants[: r % len(variants)]
                        for v in order:
                            _durable(registry, sealed_ps, "NORMAL" if "NORMAL" in v else "FULL")
                            vectors_module.FLUSH_CHUNKS = 1 if "at once" in v else flush_chunks
                            row: Row = await metered(pid, phase(v, f"r{r}{VARIANTS.index(v)}"))
                            if r:
                                rates[v].append(row.rate or math.nan)
                                cpu[v].append((row.cpu_ms(0), row.cpu_ms(1)))
                            load.append(os.getloadavg()[0])
                    _durable(registry, sealed_ps, "FULL")
        finally:
            registry.close()
    return report(args, rates, cpu, load, time.perf_counter() - t_start)


def report(args, rates, cpu, load, seconds: float) -> str:
    cmd = "python -m bench.gate_costs " + " ".join(sys.argv[1:])
    floor = statistics.median(rates["floor"]) if rates.get("floor") else math.nan
    lines = [
        f"- command: `{cmd}`",
        f"- {args.rounds} measured rounds after one warm-up, variants in rotated order; "
        f"{args.per} gates per principal x {args.principals} principals per variant and round; "
        f"run time {seconds:.0f} s; 1-minute load average {min(load):.1f}-{max(load):.1f} during the run",
        "",
        "| variant | gates/s per round | median gates/s | of the floor (median) "
        "| CPU ms/gate python | CPU ms/gate server |",
        "|---|---|---|---|---|---|",
    ]
    for v, rs in rates.items():
        med = statistics.median(rs)
        py = statistics.median(c[0] for c in cpu[v])
        srv = statistics.median(c[1] for c in cpu[v])
        per_round = ", ".join(f"{x:.1f}" for x in rs)
        lines.append(f"| {v} | {per_round} | {med:.1f} | {med / floor:.0%} | {py:.0f} | {srv:.0f} |")
    # Per-round ratio (gate / floor of the same round): the noise of the ratio itself.
    if "floor" in rates and "gate" in rates:
        ratios = [g / f for g, f in zip(rates["gate"], rates["floor"])]
        lines.append("")
        lines.append("gate / floor per round: " + ", ".join(f"{x:.0%}" for x in ratios))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--principals", type=int, default=4)
    ap.add_argument("--per", type=int, default=12, help="gates per principal per variant and round (default 12)")
    ap.add_argument("--rounds", type=int, default=4, help="measured rounds (default 4)")
    ap.add_argument("--only", nargs="*", choices=VARIANTS, help="run only these variants")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    console = Console() if sys.stdout.isatty() else Console(width=160)
    text = asyncio.run(costs(args, console))
    console.print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
