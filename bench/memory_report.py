"""The memory bench's markdown report: the machine and code measured, the activation and
retrieval tables against the naive baseline, index memory and the goals met or not."""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    from threadpoolctl import threadpool_info
except ImportError:
    threadpool_info = None

from bench.machine_info import command_line, machine_line
from bench.memory_corpus import DIM, FILTER, POOL, PRESENCE, QUERY_DIMS, THRESHOLD, WARMUP, K
from vicar.settings import MemoryParams

GOALS = {"act_ms": 100.0, "p50_ms": 25.0, "p95_ms": 60.0, "speedup": 50.0}


@dataclass
class Row:
    size: int
    label: str
    candidates: int
    ranked: int
    rank_ms: list[float]
    e2e_ms: list[float] = field(default_factory=list)
    fetch_ms: list[float] = field(default_factory=list)
    naive_ms: list[float] = field(default_factory=list)
    agree: str = "—"


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else math.nan


def fmt(x: float, spec: str = ".1f") -> str:
    return "—" if x is None or math.isnan(x) else format(x, spec)


def machine() -> str:
    return machine_line(f"numpy {np.__version__}", f"SQLite {sqlite3.sqlite_version}")


def code_version() -> str:
    """The commit measured, and whether memory/ or vicar/ differed from it (others edit them)."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "memory", "vicar"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    changed = [line[3:] for line in dirty.splitlines() if line.strip()]
    return sha + (
        f" with uncommitted changes in {', '.join(changed)}" if changed else ", memory/ and vicar/ unmodified"
    )


def blas() -> str:
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    env = f"OPENBLAS_CORETYPE={coretype}" if coretype else "OPENBLAS_CORETYPE unset"
    if threadpool_info is None:
        return f"threadpoolctl not installed; {env}"
    pools = [
        f"{p.get('internal_api')} {p.get('version')}, kernel {p.get('architecture')}, {p.get('num_threads')} threads"
        for p in threadpool_info()
        if p.get("user_api") == "blas"
    ]
    return f"{'; '.join(pools) or 'no BLAS found'}; {env}"


def params_text() -> str:
    p = MemoryParams(threshold=THRESHOLD)
    keys = ("threshold", "decay", "activation_mode", "w_activation", "w_similarity", "top_k", "noise_s", "spreading")
    return f"MemoryParams({', '.join(f'{k}={getattr(p, k)!r}' for k in keys)})"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}", *(f"| {' | '.join(r)} |" for r in rows)]


def verdict(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


def report(
    args: argparse.Namespace,
    started: str,
    load: tuple[float, float],
    act_rows: list[list[str]],
    act: dict[str, float],
    rows: list[Row],
    mems: dict[int, dict[str, float]],
    breakdown: list[list[str]],
    run_s: float,
) -> str:
    big = max(mems)
    lines = [
        "# Vicar memory benchmark",
        "",
        f"- command: `{command_line()}`",
        f"- date: {started}",
        f"- code: {code_version()}",
        f"- machine: {machine()}",
        f"- BLAS (threadpoolctl): {blas()}",
        f"- run time: {run_s:.0f} s; 1-minute load average {load[0]:.2f} before, {load[1]:.2f} after",
        f"- data: seeded synthetic (seed {args.seed}); random unit float32 vectors (dim {DIM}, "
        f"{POOL} distinct per dimension), presence per chunk "
        + ", ".join(f"{d} {s:.0%}" for d, s in PRESENCE.items())
        + "; 1-20 traces per chunk (unique, random in [0, now), now = 2 x chunks); "
        "structural fields drawn from skewed distributions (filter "
        + ", ".join(f"{k}={v}" for k, v in FILTER.items())
        + " selects the most common pair)",
        "",
        "## 1. Activation of 1,000,000 chunks",
        "",
        f"{act['traces']:,} traces (1-9 per chunk, ~5), now = 2,000,000, d = 0.5. p50/min over 15 runs.",
        "",
        *table(["function", "p50 ms", "min ms", "vs pure Python"], act_rows),
        "",
        f"numpy exact vs pure Python: max |diff| {act['py_err']:.1e}. Hybrid vs exact on these histories: "
        f"mean |diff| {act['gap_mean']:.3f}, max {act['gap_max']:.3f}.",
        "",
        "## 2. Retrieval minus query embedding",
        "",
        f"`memory.retrieval.rank` on a `MemoryIndex(dim={DIM}, hybrid_k={K})` with `{params_text()}` "
        f"(no noise seed, so no noise) unless the row says otherwise; query vectors for "
        f"{', '.join(QUERY_DIMS)}. {args.queries} queries per row after {WARMUP} warm-ups, each at a new N "
        "(as every gate has its own), so the index's activation cache, which serves a gate's second "
        "retrieval at the same N, never answers except in the row that says so. "
        "*fetch* = `RecordStore.get_chunks` of the top-k ids (SQLite file, WAL), as "
        "`PrincipalMemory.retrieve` does; *end-to-end* = rank + fetch, per query. "
        "*naive* = one SQL query for every candidate row (`SELECT *`, traces and vectors as JSON text), "
        "json.loads, activation via math (vectors parsed only for chunks above the threshold), "
        "cosine via sum/zip, the same composite; it already holds the records, so it needs no fetch. "
        f"It runs on the first queries until {args.naive_budget:g} s (at least one). "
        "Speedup = naive p50 / Vicar end-to-end p50.",
        "",
        *table(
            [
                "chunks",
                "query",
                "candidates",
                "ranked",
                "rank p50",
                "rank p95",
                "fetch p50",
                "end-to-end p50",
                "end-to-end p95",
                "naive p50 (n)",
                "speedup",
                "top-k equal to naive",
            ],
            [
                [
                    f"{r.size:,}",
                    r.label,
                    f"{r.candidates:,}",
                    f"{r.ranked:,}",
                    fmt(pct(r.rank_ms, 50)),
                    fmt(pct(r.rank_ms, 95)),
                    fmt(pct(r.fetch_ms, 50)),
                    fmt(pct(r.e2e_ms, 50)),
                    fmt(pct(r.e2e_ms, 95)),
                    f"{fmt(pct(r.naive_ms, 50), '.0f')} ({len(r.naive_ms)})" if r.naive_ms else "—",
                    f"{pct(r.naive_ms, 50) / pct(r.e2e_ms, 50):.0f}x" if r.naive_ms else "—",
                    r.agree,
                ]
                for r in rows
            ],
        ),
        "",
        "All times in ms.",
        "",
        "Where rank()'s time goes (medians of the index's stages called one by one, each at a new N; "
        "activations are computed for every chunk, then indexed by the candidates; similarity() with "
        "BLAS threads as rank() sets them):",
        "",
        *table(
            ["chunks", "query", "candidates() ms", "activations exact ms", "activations hybrid ms", "similarity() ms"],
            breakdown,
        ),
        "",
        "## 3. Index memory",
        "",
        *table(
            [
                "chunks",
                "traces",
                "build s",
                "nbytes() MiB",
                "nbytes per 100k MiB",
                "RSS growth MiB",
                "peak RSS growth MiB",
            ],
            [
                [
                    f"{n:,}",
                    f"{m['traces']:,}",
                    fmt(m["build_s"]),
                    fmt(m["nbytes"] / 2**20, ".0f"),
                    fmt(m["nbytes"] / 2**20 * 100_000 / n, ".0f"),
                    fmt(m["rss_growth"] / 2**20, ".0f"),
                    fmt(m["peak_growth"] / 2**20, ".0f"),
                ]
                for n, m in sorted(mems.items())
            ],
        ),
        "",
        f"{len(PRESENCE)} vector columns ({', '.join(PRESENCE)}). nbytes() counts the arrays' capacity "
        "(Growable doubles), not the Python list/dict of ids. RSS is measured in a fresh process that "
        "generates the data, returns freed heap (malloc_trim) and then builds the index: growth is VmRSS "
        "after minus before the build, "
        "peak is VmHWM (reset before the build) minus VmRSS before.",
        "",
        "## Goals",
        "",
    ]
    at = [r for r in rows if r.size == big and r.naive_ms]
    lines.append(
        f"- hybrid activation of 1M chunks <= {GOALS['act_ms']:.0f} ms: p50 {act['hybrid_p50']:.1f} ms "
        f"— {verdict(act['hybrid_p50'] <= GOALS['act_ms'])}"
    )
    for r in at:
        p50, p95 = pct(r.e2e_ms, 50), pct(r.e2e_ms, 95)
        speed = pct(r.naive_ms, 50) / p50
        lines += [
            f"- {r.size:,} chunks, {r.label}: end-to-end p50 {p50:.1f} ms <= {GOALS['p50_ms']:.0f} — "
            f"{verdict(p50 <= GOALS['p50_ms'])}; p95 {p95:.1f} ms <= {GOALS['p95_ms']:.0f} — "
            f"{verdict(p95 <= GOALS['p95_ms'])}; {speed:.0f}x the naive baseline >= {GOALS['speedup']:.0f}x — "
            f"{verdict(speed >= GOALS['speedup'])} (rank alone: p50 {pct(r.rank_ms, 50):.1f}, "
            f"p95 {pct(r.rank_ms, 95):.1f} ms)",
        ]
    return "\n".join(lines) + "\n"
