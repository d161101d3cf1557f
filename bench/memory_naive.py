"""The memory bench's naive baseline: the old reference retrieval (candidate rows from
SQLite with vectors and traces as JSON text, then pure Python), built on the same
synthetic corpus as Vicar's index."""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from pathlib import Path

from bench.memory_corpus import QUERY_DIMS, Corpus, Filters, chunk_row, json_pools
from vicar.memory.migrations import COLUMNS
from vicar.settings import MemoryParams


def build_naive(c: Corpus, path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")  # build speed only; queries below are plain reads
    db.execute("PRAGMA synchronous=OFF")
    cols = [*COLUMNS, "traces", *QUERY_DIMS]
    db.execute(f"CREATE TABLE naive ({', '.join(cols)})")
    db.execute("CREATE INDEX naive_struct ON naive (state, task_type)")
    text = json_pools()
    db.execute("BEGIN")
    db.executemany(
        f"INSERT INTO naive ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        (
            [
                *(r[col] for col in COLUMNS),
                json.dumps(c.traces[i]),
                *(text[d][c.pick[d][i]] if c.pick[d][i] >= 0 else None for d in QUERY_DIMS),
            ]
            for i, r in ((i, chunk_row(c, i)) for i in range(c.n))
        ),
    )
    db.execute("COMMIT")
    return db


def naive_rank(
    db: sqlite3.Connection, filters: Filters, qvecs: dict[str, list[float]], now: int, p: MemoryParams
) -> list[tuple[float, str]]:
    """The old reference retrieval: every candidate row from SQLite, then pure Python."""
    assert all(isinstance(v, str) for v in filters.values()), "the baseline filters on single values"
    where = " AND ".join(f"{f} = ?" for f in filters) or "1"
    cur = db.execute(
        f"SELECT rowid, id, traces, {', '.join(QUERY_DIMS)}, * FROM naive WHERE {where}", tuple(filters.values())
    )
    alive = []
    for row in cur:
        total = sum(max(now - t, p.age_floor) ** -p.decay for t in json.loads(row[2]))
        act = math.log(total) if total > 0 else -math.inf
        if act > p.threshold:
            alive.append((act, row))
    if not alive:
        return []
    lo, hi = min(a for a, _ in alive), max(a for a, _ in alive)
    scored = []
    for act, row in alive:
        cosines = [
            sum(x * y for x, y in zip(json.loads(text), qvecs[d]))
            for d, text in zip(QUERY_DIMS, row[3:6])
            if text is not None
        ]
        sim = sum(cosines) / len(cosines) if cosines else 0.0
        norm = (act - lo) / (hi - lo) if hi > lo else 1.0
        scored.append((p.w_activation * norm + p.w_similarity * sim, row[0], row[1]))
    # Ties go to the newer chunk (higher rowid), as in rank().
    return [(s, cid) for s, _, cid in heapq.nlargest(p.top_k, scored)]
