"""The payload codec's cost (vicar/runtime/codec.py): the gate bench's sequential and concurrent
phases, sealed and plain, interleaved in one run against one embedded server.

    python -m bench.codec_bench [--gates 60] [--principals 4] [--rounds 2] [--out bench/CODEC_RESULTS.md]

Two in-process workers on their own task queues, one built on a client with the codec
(what Vicar runs) and one on a client without it (pydantic alone, the floor); each has
its own principals, trained first, so neither's brains or caches serve the other. The
phases alternate (sealed, plain, plain, sealed, ...) so a drift in the machine's load
falls on both. Also the codec alone: seal + open of one gate request's payload.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.gate_bench import concurrent, gate, sequential, train
from bench.gate_common import BENCH_ENV, Row, phase_progress, proxy_parts
from bench.machine_info import command_line, machine_line
from vicar.memory.embedder import default_embedder
from vicar.models import EscalationMode
from vicar.runtime.codec import AesGcmCodec
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client


class Counted:
    """Counts the payloads the codec seals and opens (client and worker share it)."""

    def __init__(self, codec) -> None:
        self.n = 0
        self.counting = False
        for name in ("seal", "open"):
            setattr(codec, name, self._counted(getattr(codec, name)))

    def _counted(self, fn):
        def counted(payload):
            self.n += self.counting
            return fn(payload)

        return counted


def codec_alone(client: Client, n: int = 2000) -> tuple[float, int]:
    """Microseconds to seal and open one gate request's payload; its size in bytes."""
    codec = client.data_converter.payload_codec
    assert isinstance(codec, AesGcmCodec), "a client of vicar.runtime.codec.data_converter"
    payload = client.data_converter.payload_converter.to_payloads([gate("bench-p0", "x", 0)])[0]
    t0 = time.perf_counter()
    for _ in range(n):
        codec.open(codec.seal(payload))
    return (time.perf_counter() - t0) / n * 1e6, payload.ByteSize()


async def bench(args: argparse.Namespace, console: Console) -> str:
    t_start = time.perf_counter()
    os.environ.update(BENCH_ENV, VICAR_DATA_DIR=tempfile.mkdtemp(prefix="vicar-codec-bench-"))
    settings = Settings.from_env()
    run = uuid.uuid4().hex[:6]
    people = {mode: [f"{mode}-p{i}" for i in range(args.principals)] for mode in ("sealed", "plain")}
    results: dict[str, dict[str, list[Row]]] = {m: {"seq": [], "conc": []} for m in people}
    async with temporal_client(settings, embedded=True) as (sealed_client, _server):
        await asyncio.to_thread(default_embedder)
        config = sealed_client.config()
        config["data_converter"] = pydantic_data_converter
        plain_client = Client(**config)
        assert sealed_client.data_converter.payload_codec is not None
        clients = {"sealed": sealed_client, "plain": plain_client}
        _, registry, predictor = proxy_parts(settings)
        workers = [
            build_worker(clients[m], settings, task_queue=f"codec-{m}", registry=registry, predictor=predictor)[0]
            for m in people
        ]
        micro_us, payload_bytes = codec_alone(sealed_client)
        counted = Counted(sealed_client.data_converter.payload_codec)
        per = math.ceil(args.gates / args.principals)
        try:
            async with workers[0], workers[1]:
                with phase_progress(console) as progress:
                    trained = {m: await train(clients[m], f"codec-{m}", people[m], run, progress) for m in people}
                    for r in range(args.rounds):
                        order = ["sealed", "plain"] if r % 2 == 0 else ["plain", "sealed"]
                        for m in order:
                            counted.counting = m == "sealed"
                            results[m]["seq"].append(
                                await sequential(
                                    clients[m],
                                    f"codec-{m}",
                                    people[m],
                                    f"{run}{r}s",
                                    args.gates,
                                    EscalationMode.never,
                                    f"{m}: sequential, round {r + 1}",
                                    progress,
                                )
                            )
                        for m in reversed(order):
                            counted.counting = m == "sealed"
                            results[m]["conc"].append(
                                await concurrent(clients[m], f"codec-{m}", people[m], f"{run}{r}c", per, progress)
                            )
        finally:
            registry.close()
    sealed_gates = sum(r.total for rows in results["sealed"].values() for r in rows)
    return report(
        args, results, trained, micro_us, payload_bytes, counted.n / sealed_gates, time.perf_counter() - t_start
    )


def report(args, results, trained, micro_us: float, payload_bytes: int, per_gate: float, seconds: float) -> str:
    def p50(rows: list[Row]) -> float:
        return statistics.median(x for r in rows for x in r.latencies) * 1000

    def rate(rows: list[Row]) -> float:
        return sum(r.total for r in rows) / sum(math.nan if r.wall is None else r.wall for r in rows)

    def each(rows: list[Row]) -> str:
        return ", ".join(f"{r.rate:.1f}" for r in rows)

    s, p = results["sealed"], results["plain"]
    lines = [
        "# The payload codec's cost (bench/codec_bench.py)",
        "",
        f"Command: `{command_line()}`",
        "",
        f"Machine: {machine_line()}. Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {seconds:.0f} s, "
        f"{args.rounds} rounds of each phase, sealed and plain interleaved; {args.principals} principals per side, "
        f"trained first (human answers needed: sealed {sorted(trained['sealed'].values())}, "
        f"plain {sorted(trained['plain'].values())}). Environment: "
        f"{' '.join(f'{k}={v}' for k, v in BENCH_ENV.items())}. Load average (1 min) before and after: "
        f"{args.load[0]:.1f}, {os.getloadavg()[0]:.1f} (other processes share the cores: compare the rounds).",
        "",
        "| phase | plain (pydantic only) | sealed (AES-256-GCM codec) | sealed / plain |",
        "|---|---|---|---|",
        f"| sequential gates (escalation_mode=never), p50 ms, {len([x for r in s['seq'] for x in r.latencies])} "
        f"gates each (rounds: plain {', '.join(f'{p50([r]):.0f}' for r in p['seq'])}; sealed "
        f"{', '.join(f'{p50([r]):.0f}' for r in s['seq'])}) "
        f"| {p50(p['seq']):.1f} | {p50(s['seq']):.1f} | {p50(s['seq']) / p50(p['seq']):.3f} |",
        f"| {args.principals} principals concurrently, gates/s (rounds: plain {each(p['conc'])}; sealed "
        f"{each(s['conc'])}) | {rate(p['conc']):.1f} | {rate(s['conc']):.1f} | "
        f"{rate(s['conc']) / rate(p['conc']):.3f} |",
        "",
        f"The codec alone: {micro_us:.1f} µs to seal and open one gate request's payload ({payload_bytes} bytes). "
        f"A measured sealed gate passed {per_gate:.1f} payloads through the codec (sealed or opened, client and "
        f"worker together), so its CPU cost is about {per_gate * micro_us / 2 / 1000:.2f} ms per gate "
        f"({per_gate * micro_us / 2 / 1000 / p50(p['seq']) * 100:.2f}% of the plain p50): compare it with the "
        "spread between the rounds of one side, which is this shared machine's load.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=60, help="gates per measured phase and side (default 60)")
    ap.add_argument("--principals", type=int, default=4, help="principals per side (default 4)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of each phase per side (default 2)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "CODEC_RESULTS.md")
    args = ap.parse_args()
    args.load = os.getloadavg()
    console = Console() if sys.stdout.isatty() else Console(width=160)
    text = asyncio.run(bench(args, console))
    args.out.write_text(text)
    console.print(text)


if __name__ == "__main__":
    main()
