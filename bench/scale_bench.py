"""Gate throughput with 1 and 2 worker processes, sharded, on one embedded Temporal server.

    python -m bench.scale_bench [--gates 100] [--principals 8] [--burst 200] [--out bench/SCALE_RESULTS.md]

For each process count k in (1, 2), on a fresh server: k `python -m vicar.worker` processes,
each with its own data directory, VICAR_SHARD_COUNT=2 and half the shards (k=2) or all
of them (k=1), so the principals' memories are split the way a deployment splits them.
The bench process is only the client (the human and the agents). Phases, as in
bench/gate_bench.py: training until each principal's proxy decides alone, then
ceil(gates / principals) gates per principal with the principals concurrently
(gates/s), then --burst gates started at once with the server's count of
RESOURCE_EXHAUSTED answers during it. CPU is charged to the worker processes, the server
and this client separately.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import temporalio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from temporalio.client import Client

from bench.gate_bench import burst, concurrent, train
from bench.gate_common import BENCH_ENV, Row, cpu_seconds, fmt
from bench.machine_info import command_line, machine_line
from bench.prom import delta, resource_exhausted, server_metrics_url
from vicar.runtime.codec import data_converter, new_key_line
from vicar.runtime.server import EmbeddedServer, free_port
from vicar.settings import TASK_QUEUE

# The workers have a data dir each: one payload key for all of them and this client.
os.environ.setdefault("VICAR_CODEC_KEYS", new_key_line("bench"))

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 2
READY_TIMEOUT = 180.0


@dataclass
class Run:
    processes: int
    trained: dict[str, int]
    conc: Row
    bursting: Row
    exhausted: dict[str, int]
    worker_cpu: tuple[float, float]  # seconds during the concurrent phase, the burst


class Cluster:
    """An embedded server and k worker processes on it."""

    def __init__(self, tmp: Path, processes: int) -> None:
        self.tmp = tmp / f"k{processes}"
        self.server = EmbeddedServer(self.tmp / "server", port=free_port(), ui_port=free_port())
        self.processes = processes
        self.procs: list[asyncio.subprocess.Process] = []
        self.ops: list[str] = []

    async def start(self) -> None:
        await asyncio.to_thread(self.server.start)
        for i in range(self.processes):
            shards = f"0-{SHARDS - 1}" if self.processes == 1 else str(i)
            ops = f"127.0.0.1:{free_port()}"
            env = dict(
                os.environ,
                **BENCH_ENV,
                TEMPORAL_ADDRESS=self.server.address,
                VICAR_DATA_DIR=str(self.tmp / f"data-{i}"),
                VICAR_SHARD_COUNT=str(SHARDS),
                VICAR_SHARDS=shards,
                VICAR_OPS_ADDRESS=ops,
            )
            with open(self.tmp / f"worker-{i}.log", "wb") as out:
                self.procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "vicar.worker", env=env, cwd=str(ROOT), stdout=out, stderr=out
                    )
                )
            self.ops.append(ops)
        deadline = time.monotonic() + READY_TIMEOUT
        for ops, proc in zip(self.ops, self.procs):
            while not await asyncio.to_thread(_ready, ops):
                if proc.returncode is not None or time.monotonic() > deadline:
                    log = self.tmp / f"worker-{self.procs.index(proc)}.log"
                    tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                    raise RuntimeError(
                        f"worker {proc.pid} not ready (exit {proc.returncode}); {log} ends:\n" + "\n".join(tail)
                    )
                await asyncio.sleep(0.5)

    def worker_cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), timeout=60)
            except TimeoutError:
                proc.kill()
        await asyncio.to_thread(self.server.stop)


def _ready(ops: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{ops}/readyz", timeout=3) as resp:
            return resp.status == 200
    except OSError:
        return False


async def one_run(tmp: Path, processes: int, args: argparse.Namespace, progress: Progress) -> Run:
    cluster = Cluster(tmp, processes)
    await cluster.start()
    try:
        client = await Client.connect(cluster.server.address, data_converter=data_converter())
        principals = [f"scale-{processes}-p{i}" for i in range(args.principals)]
        run = f"k{processes}"
        trained = await train(client, TASK_QUEUE, principals, run, progress)
        per = math.ceil(args.gates / args.principals)
        assert cluster.server.pid is not None  # started above
        pids: list[int | str] = ["self", cluster.server.pid]
        before = [cpu_seconds(p) for p in pids], cluster.worker_cpu()
        conc = await concurrent(client, TASK_QUEUE, principals, run, per, progress)
        after = [cpu_seconds(p) for p in pids], cluster.worker_cpu()
        conc.cpu = (after[0][0] - before[0][0], after[0][1] - before[0][1])
        conc_workers = after[1] - before[1]
        url = server_metrics_url(cluster.tmp)
        ex_before = resource_exhausted(url)
        w0 = cluster.worker_cpu()
        bursting = await burst(client, TASK_QUEUE, principals, run, args.burst, progress)
        burst_workers = cluster.worker_cpu() - w0
        exhausted = delta(ex_before, resource_exhausted(url))
    finally:
        await cluster.stop()
    return Run(processes, trained, conc, bursting, exhausted, (conc_workers, burst_workers))


def report(args: argparse.Namespace, runs: list[Run], total_s: float, load: tuple[float, float]) -> str:
    lines = [
        "# Vicar scale benchmark: 1 and 2 worker processes",
        "",
        f"- command: `{command_line()}`",
        f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {machine_line(f'temporalio {temporalio.__version__}')}",
        "- setup: embedded Temporal dev server; `python -m vicar.worker` processes with "
        f"VICAR_SHARD_COUNT={SHARDS}, each "
        "its own data directory and shards (k=1: all; k=2: one each); the default (learned) predictor with "
        f"{' '.join(f'{k}={v}' for k, v in BENCH_ENV.items())} (as bench/gate_bench.py); "
        "this process is only the client",
        f"- run time: {total_s:.0f} s; 1-minute load average {load[0]:.2f} before, {load[1]:.2f} after",
        "",
        "| worker processes | phase | gates | escalated | p50 ms | p95 ms | gates/s | CPU ms/gate: workers "
        "| CPU ms/gate: server | CPU ms/gate: client | RESOURCE_EXHAUSTED |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        c = r.conc
        lines.append(
            f"| {r.processes} | {args.principals} principals concurrently | {c.total} | {c.escalated} | "
            f"{fmt(c.pct(50))} | {fmt(c.pct(95))} | {fmt(c.rate)} | {fmt(r.worker_cpu[0] * 1000 / c.total, '.0f')} | "
            f"{fmt(c.cpu_ms(1), '.0f')} | {fmt(c.cpu_ms(0), '.0f')} | — |"
        )
        b = r.bursting
        lines.append(
            f"| {r.processes} | {args.burst} gates at once | {b.total} | {b.escalated} | {fmt(b.pct(50))} | "
            f"{fmt(b.pct(95))} | {fmt(b.rate)} | {fmt(r.worker_cpu[1] * 1000 / b.total, '.0f')} | — | — | "
            f"{sum(r.exhausted.values())} |"
        )
    lines += [
        "",
        "Training (human answers per principal before the proxy decided alone): "
        + "; ".join(f"k={r.processes}: {', '.join(map(str, r.trained.values()))}" for r in runs)
        + ".",
        "",
        "RESOURCE_EXHAUSTED = the server's own `service_errors_resource_exhausted` (frontend) during the "
        "burst: Temporal's in-flight update limit (10 per workflow) answered. Only the owner of a "
        "principal's home shard sends its brain `take_turn` updates (at most 4 in flight per principal "
        "from that process); other processes queue by signal.",
        "",
    ]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, console: Console) -> str:
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    runs = []
    tmp = Path(tempfile.mkdtemp(prefix="vicar-scale-"))
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        for k in args.processes:
            runs.append(await one_run(tmp, k, args, progress))
    shutil.rmtree(tmp, ignore_errors=True)  # kept, with the workers' logs, when a run fails
    return report(args, runs, time.perf_counter() - t0, (load_before, os.getloadavg()[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=100, help="gates in the concurrent phase (default 100)")
    ap.add_argument("--principals", type=int, default=8, help="concurrent principals (default 8)")
    ap.add_argument("--burst", type=int, default=200, help="gates started at once (default 200)")
    ap.add_argument(
        "--processes",
        type=lambda s: [int(k) for k in s.split(",")],
        default=[1, 2],
        help="worker process counts to run, comma-separated (default 1,2; at most 2 shards)",
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "SCALE_RESULTS.md")
    args = ap.parse_args()
    console = Console() if sys.stdout.isatty() else Console(width=160)
    text = asyncio.run(main_async(args, console))
    args.out.write_text(text)
    console.print(text)
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    main()
