"""The storage decision (memory/storage.py) in the replay: memory size and retrieval time
against the shipped default (every chunk persisted), at the accuracy and macro-F1 each
reaches, in one run on the full dev data (online, no peeking).

Retrieval time is every `PrincipalMemory.retrieve` call of the run, timed here (the
bench wraps the method; the product is untouched), as a ratio to the default measured
in the same run.

    python -m bench.storage_bench [--limit N] [--out bench/STORAGE_RESULTS.md]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.dev_replay import load_dev
from bench.machine_info import command_line, machine_line
from vicar.eval import metrics as m
from vicar.eval.replay import Variant, replay_reviewer
from vicar.memory.principal import PrincipalMemory
from vicar.settings import MemoryParams

ROOT = Path(__file__).resolve().parents[1]


class Timed:
    """Accumulates the time of every retrieve call while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._original = PrincipalMemory.retrieve

    def __enter__(self) -> "Timed":
        original = self._original

        def timed(memory, query):
            start = time.perf_counter()
            try:
                return original(memory, query)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        setattr(PrincipalMemory, "retrieve", timed)  # every memory's, for the run
        return self

    def __exit__(self, *exc) -> None:
        setattr(PrincipalMemory, "retrieve", self._original)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="gates per reviewer (0: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "STORAGE_RESULTS.md")
    args = ap.parse_args()
    started = datetime.now(UTC)
    console = Console(stderr=True)
    settings, events, embedder = load_dev(args.limit, console)

    rows: dict[str, dict[str, Any]] = {}
    for name, params in (("default (persist all)", MemoryParams()), ("storage decision", MemoryParams(storage=True))):
        variant = Variant(name=name, predictor="learned", memory=params)
        sizes: Counter[str] = Counter()

        def inspect(memory: PrincipalMemory) -> None:
            statuses = Counter(row[-1] for row in memory.store.index_rows())
            sizes["records"] += sum(statuses.values())
            sizes["retrievable"] += statuses["active"] + statuses["buffered"]
            sizes["vectors"] += memory.vectors.count()
            sizes["vector bytes"] += sum(col.rows.nbytes for col in memory.index.vectors.values())
            for status, k in statuses.items():
                sizes[f"status {status}"] += k

        preds = []
        with Timed() as timer, console.status(f"replaying: {name} ..."):
            start = time.perf_counter()
            for evs in events.values():
                preds += replay_reviewer(evs, variant, embedder, settings, inspect=inspect)
            wall = time.perf_counter() - start
        alone = [p for p in preds if p.autonomous]
        rows[name] = dict(
            sizes=sizes,
            acc=m.accuracy(preds),
            f1=m.macro_f1(preds),
            share=len(alone) / len(preds),
            err=(1 - m.accuracy(alone)) if alone else None,
            retrieve=timer.seconds,
            calls=timer.calls,
            wall=wall,
        )
        console.print(f"{name}: macro-F1 {rows[name]['f1']:.3f}, {sizes['retrievable']} retrievable chunks")

    base = rows["default (persist all)"]
    lines = [
        "# Storage decision: memory size and retrieval time in the replay",
        "",
        f"Command: `{command_line()}` (started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()}. Dev data: {len(preds)} gates of {len(events)} reviewers, each replayed "
        "into a fresh memory; sizes are summed over the reviewers' memories at the end of the replay. "
        "Retrieval time: every retrieve call of the run (prior and posterior of each gate), its ratio to "
        "the default's in the same run.",
        "",
        "| variant | accuracy | macro-F1 | autonomy | autonomous error | records | retrievable chunks | "
        "vectors | vector bytes | retrieval s (calls) | retrieval vs default | replay s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        s = r["sizes"]
        err = "—" if r["err"] is None else f"{r['err']:.3f}"
        lines.append(
            f"| {name} | {r['acc']:.3f} | {r['f1']:.3f} | {r['share']:.3f} | {err} | {s['records']} | "
            f"{s['retrievable']} | {s['vectors']} | {s['vector bytes']:,} | {r['retrieve']:.1f} "
            f"({r['calls']}) | {r['retrieve'] / base['retrieve']:.2f}x | {r['wall']:.0f} |"
        )
    decided = rows["storage decision"]["sizes"]
    lines += [
        "",
        "Chunk statuses with the storage decision at the end: "
        + ", ".join(f"{k.removeprefix('status ')} {v}" for k, v in sorted(decided.items()) if k.startswith("status "))
        + ".",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
