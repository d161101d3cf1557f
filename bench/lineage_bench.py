"""Lineage lookups: the replay's speed with and without them, and one lookup's cost as
the memory grows (an index walk: flat, where a scan would grow with the store).

    python -m bench.lineage_bench [--events 600]

Both figures are ratios against a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from vicar.eval.dataset import load_events
from vicar.eval.replay import Variant, event_texts, replay_reviewer
from vicar.memory.chunk import MemoryChunk
from vicar.memory.embedder import default_embedder
from vicar.memory.migrations import COLUMNS
from vicar.memory.store import RecordStore
from vicar.settings import RetrievalOptions, Settings

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "gate-replay" / "dev"


def replay_ratio(n_events: int) -> tuple[float, float, float]:
    events = load_events([DATA / "git-whats-cooking.jsonl.gz"])["Junio C Hamano"][:n_events]
    embedder = default_embedder()
    embedder.embed(event_texts(events))  # the model's time is the same for both; keep it out
    variants = {k: Variant(name=f"lineage-{k}", retrieval=RetrievalOptions(lineage_history=k)) for k in (0, 3)}
    times: dict[int, list[float]] = {0: [], 3: []}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp))
        for k in (0, 3, 3, 0):  # alternated: drift on a shared machine falls on both
            t = time.perf_counter()
            replay_reviewer(events, variants[k], embedder, settings)
            times[k].append(time.perf_counter() - t)
    base, with_lineage = min(times[0]), min(times[3])
    return n_events / base, n_events / with_lineage, with_lineage / base


def lookup_seconds(store: RecordStore, lineages: list[str], n: int, reps: int = 2000) -> float:
    rng = random.Random(1)
    t = time.perf_counter()
    for _ in range(reps):
        store.lineage_history("gate", rng.choice(lineages), n, 3)
    return (time.perf_counter() - t) / reps


def store_with(path: Path, chunks: int, lineages: list[str]) -> RecordStore:
    store = RecordStore(path)
    rng = random.Random(0)
    rows = []
    for i in range(chunks):
        row = MemoryChunk(
            id=f"c{i}",
            principal="bench",
            state="WORK_ASSERT",
            task_type="t",
            outcome="approve",
            answered_by=rng.choice(("human", "proxy")),
            question="q",
            human_response="ok",
            created_n=i + 1,
            lineage=rng.choice(lineages),
            revision="v1",
            artifact_hash=f"{i:016x}",
        ).model_dump()
        row["kind"], row["salient_percepts"] = "gate", "[]"
        rows.append([row[c] for c in COLUMNS])
    with store.transaction() as db:  # one transaction: add_chunk's per-chunk commits take minutes
        db.executemany(f"INSERT INTO chunks ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        db.executemany("INSERT INTO traces VALUES (?, ?)", [(r[0], i + 1) for i, r in enumerate(rows)])
    return store


def lookup_ratio() -> tuple[float, float, float]:
    small, large = 1_000, 50_000
    with tempfile.TemporaryDirectory() as tmp:
        # Threads of ~10 verdicts each, however large the memory.
        a = store_with(Path(tmp) / "a.db", small, [f"topic/{i}" for i in range(small // 10)])
        b = store_with(Path(tmp) / "b.db", large, [f"topic/{i}" for i in range(large // 10)])
        ta = statistics.median(
            lookup_seconds(a, [f"topic/{i}" for i in range(small // 10)], small + 1) for _ in range(3)
        )
        tb = statistics.median(
            lookup_seconds(b, [f"topic/{i}" for i in range(large // 10)], large + 1) for _ in range(3)
        )
        a.close()
        b.close()
    return ta, tb, tb / ta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=600)
    args = ap.parse_args()
    base, lin, ratio = replay_ratio(args.events)
    print(
        f"replay, Junio's first {args.events} gates: {base:.0f} gates/s without lineage, "
        f"{lin:.0f} with; time ratio {ratio:.3f}"
    )
    ta, tb, r = lookup_ratio()
    print(f"one lineage lookup: {ta * 1e6:.0f} us at 1,000 chunks, {tb * 1e6:.0f} us at 50,000; ratio {r:.2f}")


if __name__ == "__main__":
    main()
