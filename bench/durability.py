"""The cost of durable commits (issue 24, item 3): the memory store commits with
`synchronous=FULL` (each commit fsyncs the WAL) so a recorded answer survives a power
loss. This phase runs the same sequential and concurrent gates with the store at FULL and
at NORMAL, interleaved in blocks so load drift hits both alike, and reports the
difference beside the floor measured earlier in the same run."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

import vicar.memory.store as store_module

MODES = ("FULL", "NORMAL")
BLOCKS = 4  # per mode, alternating


def _reopen(registry, principals: list[str], mode: str) -> None:
    """The pragma is set when a store opens: close the principals' memories so the next
    gate opens them again under `mode`."""
    store_module.DURABLE_SYNCHRONOUS = mode
    for p in principals:
        registry.release(p)


async def durability(client, registry, timer, principals: list[str], run: str, n: int, per: int,
                     progress, sequential, concurrent, mode_when_unsure) -> dict[str, dict]:
    """Per mode: the sequential autonomous gates' latencies, record_outcome's wall time
    per call, and the concurrent phase's gates/s."""
    out: dict[str, dict] = {m: {"latencies": [], "record_ms": [], "rates": []} for m in MODES}
    saved, timer.samples = timer.samples, defaultdict(list)
    block = max(1, math.ceil(n / BLOCKS))
    try:
        for b in range(BLOCKS):
            for mode in (MODES if b % 2 == 0 else MODES[::-1]):
                _reopen(registry, principals, mode)
                timer.samples.clear()
                timer.enabled = True
                row = await sequential(client, "bench-gates", principals, f"{run}d{mode[0]}{b}", block,
                                       mode_when_unsure, f"durability: synchronous={mode}, sequential (block {b + 1})",
                                       progress)
                timer.enabled = False
                out[mode]["latencies"] += row.latencies
                out[mode]["record_ms"] += [s * 1000 for s in timer.samples.get("record_outcome", [])]
                conc = await concurrent(client, "bench-gates", principals, f"{run}d{mode[0]}{b}c",
                                        max(2, per // 2), progress)
                out[mode]["rates"].append(conc.rate or math.nan)
    finally:
        timer.enabled = False
        timer.samples = saved
        _reopen(registry, principals, "FULL")
    return out


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def report_lines(out: dict[str, dict], floor_p50_ms: float, floor_rate: float, data_dir: str, fs: str) -> list[str]:
    full, normal = out["FULL"], out["NORMAL"]
    lat = {m: [x * 1000 for x in out[m]["latencies"]] for m in MODES}
    p50 = {m: _pct(lat[m], 50) for m in MODES}
    rec = {m: statistics.fmean(out[m]["record_ms"]) if out[m]["record_ms"] else math.nan for m in MODES}
    rate = {m: statistics.fmean(out[m]["rates"]) if out[m]["rates"] else math.nan for m in MODES}
    lines = [
        "## Durable commits (memory store synchronous=FULL against NORMAL)",
        "",
        f"Data dir {data_dir} on {fs}. {BLOCKS} blocks per mode, alternating; the store reopened at each switch.",
        "",
        "| store pragma | counted gates | p50 ms | p95 ms | record_outcome mean ms | calls | gates/s, "
        f"concurrent |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in MODES:
        lines.append(f"| synchronous={m} | {len(lat[m])} | {p50[m]:.1f} | {_pct(lat[m], 95):.1f} | "
                     f"{rec[m]:.1f} | {len(out[m]['record_ms'])} | {rate[m]:.1f} |")
    cost = p50["FULL"] - p50["NORMAL"]
    lines += [
        "",
        f"- durable commits cost {cost:+.1f} ms at the p50 of a sequential autonomous gate "
        f"({rec['FULL'] - rec['NORMAL']:+.1f} ms in record_outcome's mean), against Temporal's floor for the "
        f"gate's shape of {floor_p50_ms:.1f} ms p50 measured in this run: {cost / floor_p50_ms:+.2f}x the floor.",
        f"- concurrently: {rate['FULL']:.1f} gates/s at FULL, {rate['NORMAL']:.1f} at NORMAL "
        f"({100 * (rate['FULL'] / rate['NORMAL'] - 1):+.0f}%); the full floor gate did {floor_rate:.1f}/s in this run.",
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

