"""The cost of durable commits (issue 24, item 3): the memory store commits with
`synchronous=FULL` (each commit fsyncs the WAL) so a recorded answer survives a power
loss. This phase runs the same sequential and concurrent gates with the store at FULL and
at NORMAL, interleaved in blocks so load drift hits both alike, and reports the
difference beside the floor measured earlier in the same run."""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import subprocess
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import vicar.memory.store as store_module

MODES = ("FULL", "NORMAL")
BLOCKS = 4  # per mode, alternating


def _reopen(registry, principals: list[str], mode: str) -> None:
    """The pragma is set when a store opens: close the principals' memories so the next
    gate opens them again under `mode`."""
    store_module.DURABLE_SYNCHRONOUS = mode
    for p in principals:
        registry.release(p)


async def durability(
    client,
    registry,
    timer,
    principals: list[str],
    run: str,
    n: int,
    per: int,
    progress,
    sequential,
    concurrent,
    mode_when_unsure,
) -> dict[str, dict]:
    """Per mode: the sequential autonomous gates' latencies, record_outcome's wall time
    per call, and the concurrent phase's gates/s."""
    out: dict[str, dict] = {m: {"latencies": [], "record_ms": [], "rates": []} for m in MODES}
    saved, timer.samples = timer.samples, defaultdict(list)
    block = max(1, math.ceil(n / BLOCKS))
    try:
        for b in range(BLOCKS):
            for mode in MODES if b % 2 == 0 else MODES[::-1]:
                _reopen(registry, principals, mode)
                timer.samples.clear()
                timer.enabled = True
                row = await sequential(
                    client,
                    "bench-gates",
                    principals,
                    f"{run}d{mode[0]}{b}",
                    block,
                    mode_when_unsure,
                    f"durability: synchronous={mode}, sequential (block {b + 1})",
                    progress,
                )
                timer.enabled = False
                out[mode]["latencies"] += row.latencies
                out[mode]["record_ms"] += [s * 1000 for s in timer.samples.get("record_outcome", [])]
                conc = await concurrent(
                    client, "bench-gates", principals, f"{run}d{mode[0]}{b}c", max(2, per // 2), progress
                )
                out[mode]["rates"].append(conc.rate or math.nan)
    finally:
        timer.enabled = False
        timer.samples = saved
        _reopen(registry, principals, "FULL")
    return out


def direct_record(root: Path, embedder, params, n: int) -> dict[str, list[float]]:
    """record_outcome's wall ms per call, called directly (no Temporal), a fresh principal
    per mode, the modes alternating in blocks: the store's own cost of fsync per commit."""
    from vicar.memory.principal import PrincipalMemory
    from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
    from vicar.proxy.outcomes import record_outcome

    out: dict[str, list[float]] = {m: [] for m in MODES}
    guess = PassResult(prose="", confidence=0.5, action=Action.approve)
    k = 0
    try:
        for b in range(BLOCKS):
            for mode in MODES if b % 2 == 0 else MODES[::-1]:
                store_module.DURABLE_SYNCHRONOUS = mode
                mem = PrincipalMemory(f"bench-direct-{mode.lower()}", root, embedder, params)
                try:
                    for _ in range(max(1, n // BLOCKS)):
                        k += 1
                        req = GateRequest(
                            principal=mem.principal,
                            gate_id=f"direct-{k}",
                            state="WORK_ASSERT",
                            task_type="docs",
                            question="Approve the documentation update?",
                            artifact_text=f"Fix typo number {k} in the durability guide.",
                        )
                        at = mem.counter() + 1
                        mem.raise_counter(at)
                        t0 = time.perf_counter()
                        record_outcome(
                            mem,
                            OutcomeRecord(
                                request=req,
                                n=at,
                                workflow_id=f"direct/{req.gate_id}",
                                action=Action.approve,
                                response_text="Fine.",
                                answered_by=AnsweredBy.human,
                                responder="bench",
                                prior=guess,
                                posterior=guess,
                            ),
                        )
                        out[mode].append((time.perf_counter() - t0) * 1000)
                finally:
                    mem.close()
    finally:
        store_module.DURABLE_SYNCHRONOUS = "FULL"
    return out


def _server(db: Path, mode: str) -> tuple[subprocess.Popen, str]:
    """A dev server like vicar/runtime/server.py's, its SQLite file at `mode`."""
    from vicar.runtime.server import free_port, temporal_binary

    port = free_port()
    proc = subprocess.Popen(
        [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--db-filename",
            str(db),
            "--log-level",
            "error",
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            f"synchronous={mode.lower()}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    return proc, f"127.0.0.1:{port}"


async def server_floors(data_dir: Path, n: int, local_activities: int, baseline, progress) -> dict[str, list[float]]:
    """Temporal's floor for the gate's shape (a workflow with the gate's no-op local
    activities, sequential, eager start) on two fresh dev servers whose SQLite files sit
    on the data dir's disk, one at each pragma, alternating in blocks: what durable
    history writes cost (vicar/runtime/server.py runs its server at FULL)."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench.floor_workflow import FloorWorkflow, noop

    out: dict[str, list[float]] = {m: [] for m in MODES}
    procs = []
    try:
        clients = {}
        async with contextlib.AsyncExitStack() as stack:
            for mode in MODES:
                proc, address = _server(data_dir / f"floor-{mode.lower()}.db", mode)
                procs.append(proc)
                for _ in range(300):
                    try:
                        clients[mode] = await Client.connect(address)
                        break
                    except RuntimeError:
                        await asyncio.sleep(0.2)
                else:
                    raise RuntimeError(f"dev server at {address} did not come up")
                await stack.enter_async_context(
                    Worker(
                        clients[mode],
                        task_queue="durable-floor",
                        workflows=[FloorWorkflow],
                        activities=[noop],
                        activity_executor=ThreadPoolExecutor(max_workers=2),
                    )
                )
            for b in range(BLOCKS):
                for mode in MODES if b % 2 == 0 else MODES[::-1]:
                    row = await baseline(
                        clients[mode],
                        "durable-floor",
                        max(1, n // BLOCKS),
                        local_activities,
                        f"durability: floor, server synchronous={mode} (block {b + 1})",
                        progress,
                    )
                    out[mode] += [x * 1000 for x in row.latencies]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return out


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def report_lines(
    out: dict[str, dict],
    direct: dict[str, list[float]],
    floors: dict[str, list[float]],
    floor_p50_ms: float,
    floor_rate: float,
    data_dir: str,
    fs: str,
) -> list[str]:
    lat = {m: [x * 1000 for x in out[m]["latencies"]] for m in MODES}
    p50 = {m: _pct(lat[m], 50) for m in MODES}
    rec = {m: _pct(out[m]["record_ms"], 50) for m in MODES}
    rate = {m: statistics.fmean(out[m]["rates"]) if out[m]["rates"] else math.nan for m in MODES}
    d50 = {m: _pct(direct[m], 50) for m in MODES}
    f50 = {m: _pct(floors[m], 50) for m in MODES}
    lines = [
        "## Durable commits (synchronous=FULL against NORMAL, issue 24 item 3)",
        "",
        f"Data dir {data_dir} on {fs}. Each pair measured in {BLOCKS} blocks per mode, alternating "
        "(the memory store reopened at each switch), so load drift hits both alike.",
        "",
        "| measurement | pragma | n | p50 ms | p95 ms | mean ms |",
        "|---|---|---|---|---|---|",
    ]
    for title, data in [
        ("record_outcome called directly (memory store)", direct),
        ("record_outcome inside the sequential gates (memory store)", {m: out[m]["record_ms"] for m in MODES}),
        ("sequential autonomous gate, start to result (memory store)", lat),
        ("Temporal's floor for the gate's shape on a fresh dev server (server's SQLite)", floors),
    ]:
        for m in MODES:
            v = data[m]
            lines.append(
                f"| {title} | {m} | {len(v)} | {_pct(v, 50):.1f} | {_pct(v, 95):.1f} | "
                f"{statistics.fmean(v) if v else math.nan:.1f} |"
            )
    lines += [
        "",
        f"- memory store: FULL costs {d50['FULL'] - d50['NORMAL']:+.1f} ms per record_outcome at the p50 called "
        f"directly ({rec['FULL'] - rec['NORMAL']:+.1f} ms inside gates); a sequential autonomous gate's p50 moved "
        f"{p50['FULL'] - p50['NORMAL']:+.1f} ms, against Temporal's floor for the gate's shape of "
        f"{floor_p50_ms:.1f} ms p50 in this run ({(d50['FULL'] - d50['NORMAL']) / floor_p50_ms:+.2f}x the floor "
        "for the direct figure).",
        f"- concurrently (escalation_mode=never, all principals): {rate['FULL']:.1f} gates/s at FULL, "
        f"{rate['NORMAL']:.1f} at NORMAL; the full floor gate did {floor_rate:.1f}/s in this run.",
        f"- the embedded server's own history writes (vicar/runtime/server.py, now FULL): the floor is "
        f"{f50['FULL']:.1f} ms p50 at FULL against {f50['NORMAL']:.1f} ms at NORMAL "
        f"({f50['FULL'] - f50['NORMAL']:+.1f} ms per gate-shaped workflow).",
        "",
    ]
    return lines


def filesystem_of(path: str) -> str:
    """The mount (type, device) holding a path, from /proc/self/mounts: fsync's cost is the disk's."""
    best = ("", "?", "?")
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, mnt, typ, *_ = line.split()
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                    best = (mnt, typ, dev)
    except OSError:
        pass
    return f"{best[1]} ({best[2]}, mounted at {best[0]})"
