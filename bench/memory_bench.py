"""Vicar's memory against a naive baseline: activation, retrieval and index memory.

    python -m bench.memory_bench [--sizes 10000,100000] [--queries 100] [--naive-budget 10]
                                 [--seed 7] [--out bench/MEMORY_RESULTS.md]

One run, three parts, all on seeded synthetic data:
  1. activation of 1,000,000 chunks: hybrid_levels (k = 3) and exact base_levels, against
     the same formula in pure Python;
  2. retrieval minus query embedding at each size: memory.retrieval.rank on a MemoryIndex,
     then the top-k records from a RecordStore (get_chunks), against the old reference
     implementation: one SQL query for the candidate rows (vectors and traces as JSON
     text), json.loads, cosine via sum/zip, activation via math, the same composite score;
  3. index memory: MemoryIndex.nbytes() and the process RSS growth while building it.
Results go to the terminal and a markdown report (--out).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import gc
import math
import multiprocessing as mp
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from bench.memory_corpus import (
    DIM,
    FILTER,
    PRESENCE,
    QUERY_DIMS,
    THRESHOLD,
    WARMUP,
    Corpus,
    Filters,
    K,
    chunk_row,
    corpus,
    histories,
    unit,
)
from bench.memory_naive import build_naive, naive_rank
from bench.memory_report import Row, fmt, pct, report

try:
    from threadpoolctl import threadpool_info
except ImportError:
    threadpool_info = None

from vicar.memory.activation import base_levels, hybrid_levels
from vicar.memory.index import STRUCT_FIELDS, MemoryIndex
from vicar.memory.migrations import COLUMNS
from vicar.memory.retrieval import Hit, Query, rank
from vicar.memory.storage import RETRIEVABLE
from vicar.memory.store import RecordStore
from vicar.settings import MemoryParams

ACT_CHUNKS = 1_000_000
NOISE_S = 0.25
# What a gate's retrieval filters on (vicar/proxy/consult.py, and the statuses
# PrincipalMemory.retrieve adds): fewer candidates still.
GATE_FILTER: Filters = {"kind": "gate", **FILTER, "answered_by": "human", "status": RETRIEVABLE}


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


T0 = time.perf_counter()


# -- Vicar's side -----------------------------------------------------------------------


def rss_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def build_index(c: Corpus) -> MemoryIndex:
    index = MemoryIndex(dim=DIM, hybrid_k=K)
    for i, cid in enumerate(c.ids):
        index.add_chunk(cid, {f: c.fields[f][i] for f in STRUCT_FIELDS}, c.traces[i])
    for dim in PRESENCE:
        for i in np.flatnonzero(c.pick[dim] >= 0).tolist():
            index.set_vector(c.ids[i], dim, c.pools[dim][c.pick[dim][i]])
    return index


def index_memory(n: int, seed: int) -> dict[str, float]:
    """Build the index in a fresh interpreter: RSS growth here is not hidden by memory this
    process freed earlier (the 1M activation arrays, the smaller sizes) and now reuses."""
    c = corpus(n, seed)
    gc.collect()
    try:  # hand the data generation's freed heap back, or the build would reuse it unseen
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    rss0 = rss_kb("VmRSS")
    peak_ok = reset_peak_rss()
    index = build_index(c)
    return {
        "nbytes": index.nbytes(),
        "rss_growth": (rss_kb("VmRSS") - rss0) * 1024,
        "peak_growth": (rss_kb("VmHWM") - rss0) * 1024 if peak_ok else math.nan,
        "traces": c.hist.trace_n.size,
    }


def build_store(c: Corpus, path: Path) -> RecordStore:
    store = RecordStore(path)
    store.set_meta("principal", "bench")
    with store.transaction() as db:
        db.executemany(
            f"INSERT INTO chunks ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
            ([row[col] for col in COLUMNS] for row in (chunk_row(c, i) for i in range(c.n))),
        )
        db.executemany(
            "INSERT INTO traces (chunk_id, n) VALUES (?, ?)", ((c.ids[i], t) for i in range(c.n) for t in c.traces[i])
        )
    return store


# -- measurement ------------------------------------------------------------------------


def ms(ns: int) -> float:
    return ns / 1e6


T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    t = time.perf_counter_ns()
    out = fn()
    return ms(time.perf_counter_ns() - t), out


def repeat(fn: Callable[[int], object], reps: int) -> list[float]:
    """Times of fn(0), fn(1), ...: the argument lets a caller vary N between calls."""
    return [timed(lambda: fn(i))[0] for i in range(reps)]


@dataclass
class Config:
    label: str
    filters: Filters
    params: MemoryParams
    naive: bool = False  # also run the baseline, fetch the records and break rank() down
    noise: bool = False  # a noise seed per query, as PrincipalMemory derives it from N
    same_n: bool = False


def activation_part(seed: int) -> tuple[list[list[str]], dict[str, float]]:
    rng = np.random.default_rng(seed)
    now = 2 * ACT_CHUNKS
    h = histories(rng, ACT_CHUNKS, now, 1, 9)  # ~5 traces per chunk
    p = MemoryParams()
    log(f"activation: {ACT_CHUNKS:,} chunks, {h.trace_n.size:,} traces, now={now:,}")
    hyb = hybrid_levels(h.recent, h.count, h.created, now, p.decay, p.age_floor)
    exact = base_levels(h.owner, h.trace_n, ACT_CHUNKS, now, p.decay, p.age_floor)
    t_h = repeat(lambda _: hybrid_levels(h.recent, h.count, h.created, now, p.decay, p.age_floor), 15)
    t_e = repeat(lambda _: base_levels(h.owner, h.trace_n, ACT_CHUNKS, now, p.decay, p.age_floor), 15)
    tn = h.trace_n.tolist()
    lists = [tn[s:e] for s, e in zip(h.starts.tolist(), h.ends.tolist())]
    d, floor = p.decay, p.age_floor
    t_py, py = timed(lambda: [math.log(sum(max(now - t, floor) ** -d for t in tr)) for tr in lists])
    err = float(np.max(np.abs(np.asarray(py) - exact)))
    log(
        f"  hybrid p50 {statistics.median(t_h):.1f} ms, exact p50 {statistics.median(t_e):.1f} ms, "
        f"pure Python {t_py:.0f} ms (max |numpy - python| {err:.1e})"
    )
    gap = np.abs(hyb - exact)
    rows = [
        ["hybrid_levels (k = 3)", fmt(statistics.median(t_h)), fmt(min(t_h)), f"{t_py / statistics.median(t_h):.0f}x"],
        [
            f"base_levels (exact, {h.trace_n.size / ACT_CHUNKS:.1f} traces/chunk)",
            fmt(statistics.median(t_e)),
            fmt(min(t_e)),
            f"{t_py / statistics.median(t_e):.0f}x",
        ],
        ["pure Python exact (1 run)", fmt(t_py), fmt(t_py), "1x"],
    ]
    info = {
        "hybrid_p50": statistics.median(t_h),
        "traces": h.trace_n.size,
        "py_err": err,
        "gap_mean": float(gap.mean()),
        "gap_max": float(gap.max()),
    }
    return rows, info


def retrieval_part(
    n: int, queries: int, naive_budget_s: float, tmp: Path, seed: int
) -> tuple[list[Row], dict[str, float], list[list[str]]]:
    log(f"n={n:,}: generating data")
    c = corpus(n, seed)
    log(f"n={n:,}: building MemoryIndex ({c.hist.trace_n.size:,} traces)")
    t_build, index = timed(lambda: build_index(c))
    log(
        f"  built in {t_build / 1000:.1f} s; building RecordStore and the naive table while a fresh "
        "process measures the index's memory"
    )
    # Nothing is timed while the two overlap: only the memory figures and the build times.
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        measured = pool.submit(index_memory, n, seed)
        t_store, store = timed(lambda: build_store(c, tmp / f"store-{n}" / "memory.db"))
        t_naive, naive = timed(lambda: build_naive(c, tmp / f"naive-{n}.db"))
        mem = measured.result()
    mem["build_s"] = t_build / 1000
    log(
        f"  store {t_store / 1000:.1f} s, naive table {t_naive / 1000:.1f} s "
        f"({os.path.getsize(tmp / f'naive-{n}.db') / 2**20:.0f} MiB); index nbytes "
        f"{mem['nbytes'] / 2**20:.0f} MiB, RSS +{mem['rss_growth'] / 2**20:.0f} MiB "
        f"(peak +{mem['peak_growth'] / 2**20:.0f} MiB)"
    )

    rng = np.random.default_rng(seed + 1)
    qsets = [dict(zip(QUERY_DIMS, unit(rng, len(QUERY_DIMS)))) for _ in range(WARMUP + queries)]
    exact = MemoryParams(threshold=THRESHOLD)
    default_tau = MemoryParams().threshold
    configs = [
        Config("state+task_type filter", FILTER, exact, naive=True),
        Config("no filter", {}, exact, naive=True),
        Config("gate's filter (kind, state, task_type, answered_by, status)", GATE_FILTER, exact),
        Config("no filter, hybrid activation", {}, MemoryParams(threshold=THRESHOLD, activation_mode="hybrid")),
        Config(f"no filter, default threshold {default_tau:g}", {}, MemoryParams()),
        Config(
            f"no filter, activation noise s = {NOISE_S:g}",
            {},
            MemoryParams(threshold=THRESHOLD, noise_s=NOISE_S),
            noise=True,
        ),
        Config("no filter, every query at one N (activation cache)", {}, exact, same_n=True),
    ]
    rows: list[Row] = []
    breakdown: list[list[str]] = []
    texts = {d: "x" for d in QUERY_DIMS}
    for cfg in configs:
        # A new N per query, as every gate has its own: only a gate's second retrieval at
        # the same N may reuse the index's cached activations (the same_n row).
        qs = [
            Query(
                now=c.now + (0 if cfg.same_n else i),
                filters=cfg.filters,
                texts=texts,
                noise_seed=i if cfg.noise else None,
            )
            for i in range(WARMUP + queries)
        ]
        p = cfg.params
        cand = index.candidates(cfg.filters)
        act = index.activations(c.now, p.decay, p.age_floor, p.activation_mode)[cand]
        row = Row(n, cfg.label, len(cand), int((act > p.threshold).sum()), [])
        hits: list[list[Hit]] = []
        for q, qv in zip(qs[:WARMUP], qsets):
            rank(index, q, qv, p)
        for q, qv in zip(qs[WARMUP:], qsets[WARMUP:]):
            t, h = timed(lambda: rank(index, q, qv, p))
            row.rank_ms.append(t)
            hits.append(h)
        log(
            f"  {cfg.label}: {row.ranked:,}/{len(cand):,} ranked, rank p50 {statistics.median(row.rank_ms):.1f} ms, "
            f"p95 {pct(row.rank_ms, 95):.1f} ms"
        )
        if cfg.naive:
            measure_fetch(row, hits, store)
            measure_naive(row, hits, list(zip(qs[WARMUP:], qsets[WARMUP:])), naive, p, naive_budget_s)
            breakdown.append(stage_times(index, c.now, cfg.filters, qsets[0], n, cfg.label))
        rows.append(row)
    store.close()
    naive.close()
    return rows, mem, breakdown


def measure_fetch(row: Row, hits: list[list[Hit]], store: RecordStore) -> None:
    """The top-k records of each query, read as PrincipalMemory.retrieve reads them."""
    for h, t_rank in zip(hits, row.rank_ms):
        t, _ = timed(lambda: store.get_chunks([x.chunk_id for x in h]))
        row.fetch_ms.append(t)
        row.e2e_ms.append(t_rank + t)


def measure_naive(
    row: Row,
    hits: list[list[Hit]],
    queries: list[tuple[Query, dict[str, np.ndarray]]],
    naive: sqlite3.Connection,
    params: MemoryParams,
    budget_s: float,
) -> None:
    """The baseline on the first queries, and whether its top-k is Vicar's."""
    spent, same, max_diff = 0.0, 0, 0.0
    for (q, qv), h in zip(queries, hits):
        vecs = {d: v.tolist() for d, v in qv.items()}
        t, ref = timed(lambda: naive_rank(naive, q.filters, vecs, q.now, params))
        row.naive_ms.append(t)
        same += [x.chunk_id for x in h] == [cid for _, cid in ref]
        max_diff = max([max_diff, *(abs(x.score - s) for x, (s, _) in zip(h, ref))])
        spent += t / 1000
        log(f"    naive: {t:.0f} ms")
        if spent > budget_s:
            break
    row.agree = f"{same}/{len(row.naive_ms)} (max score diff {max_diff:.1e})"


def blas_as_in_rank(fn: Callable[[], object]) -> object:
    """Run fn with BLAS threads as rank() sets them around similarity(), if it does."""
    try:
        from vicar.memory.index import single_threaded_blas
    except ImportError:
        return fn()
    with single_threaded_blas():
        return fn()


def stage_times(
    index: MemoryIndex, now: int, filters: Filters, qv: dict[str, np.ndarray], n: int, label: str
) -> list[str]:
    """Medians of rank()'s stages, called one by one through the index's public methods
    (a new N each time, so the activation cache never answers)."""
    p = MemoryParams(threshold=THRESHOLD)
    idx = index.candidates(filters)
    stages = [
        repeat(lambda i: index.candidates(filters), 20),
        repeat(lambda i: index.activations(now + i, p.decay, p.age_floor, "exact"), 20),
        repeat(lambda i: index.activations(now + i, p.decay, p.age_floor, "hybrid"), 20),
        repeat(lambda i: blas_as_in_rank(lambda: index.similarity(idx, qv)), 20),
    ]
    return [f"{n:,}", label, *(fmt(statistics.median(s)) for s in stages)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts for retrieval")
    ap.add_argument("--queries", type=int, default=100, help="Vicar queries per row")
    ap.add_argument(
        "--naive-budget", type=float, default=10.0, help="seconds of naive queries per row (at least one query runs)"
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("bench/MEMORY_RESULTS.md"))
    args = ap.parse_args()
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    load0 = os.getloadavg()[0]
    act_rows, act = activation_part(args.seed)
    rows: list[Row] = []
    mems: dict[int, dict[str, float]] = {}
    breakdown: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="vicar-memory-bench-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            r, mems[n], b = retrieval_part(n, args.queries, args.naive_budget, Path(tmp), args.seed + n)
            rows += r
            breakdown += b
    text = report(
        args, started, (load0, os.getloadavg()[0]), act_rows, act, rows, mems, breakdown, time.perf_counter() - T0
    )
    args.out.write_text(text)
    print("\n" + text)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
