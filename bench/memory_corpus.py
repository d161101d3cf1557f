"""The memory bench's seeded synthetic corpus and workload: chunks with structured fields, access
traces and vectors drawn from fixed pools (bench/memory_bench.py measures on it)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from vicar.memory.chunk import MemoryChunk, chunk_id_for
from vicar.memory.index import STRUCT_FIELDS
from vicar.memory.migrations import COLUMNS

DIM = 384
K = 3  # hybrid_k
QUERY_DIMS = ("situation", "stimulus", "artifact")
# Share of chunks that have each vector: not every gate has an artifact, a message, a reply.
PRESENCE = {"situation": 1.0, "artifact": 0.7, "stimulus": 0.9, "response": 0.8, "blended": 1.0}
# Distinct random vectors per dimension; chunks draw from the pool so the baseline's JSON
# text is made once per vector, not once per chunk (100k x 3 json.dumps would take minutes).
POOL = 4096

# The workload: what the queries filter on and rank above, and the warm-ups before timing.
THRESHOLD = -10.0  # below every synthetic activation: all chunks are ranked (the worst case)
WARMUP = 3
# Structural filters, as MemoryIndex.candidates and a retrieval Query take them.
Filters = dict[str, str | list[str] | None]
FILTER: Filters = {"state": "PLAN_ASSERT", "task_type": "docs"}  # the most common pair, ~14%

FIELD_VALUES: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "kind": (("gate", "preference", "procedure", "censor"), (0.9, 0.05, 0.03, 0.02)),
    "state": (("INTENT_ASSERT", "PLAN_ASSERT", "WORK_ASSERT"), (0.25, 0.45, 0.30)),
    "task_type": (
        ("docs", "db-migration", "refactor", "bugfix", "feature", "deps", "infra", "security"),
        (0.30, 0.15, 0.15, 0.12, 0.12, 0.07, 0.05, 0.04),
    ),
    "outcome": (("approve", "correct", "reject", "hold", "withdraw"), (0.6, 0.2, 0.1, 0.07, 0.03)),
    "answered_by": (("human", "proxy"), (0.6, 0.4)),
}
# What the corpus does not draw (a chunk's status, its lineage, ...) holds the chunk
# model's default, as a fresh gate's chunk does: a field the store or the index gains
# later then needs nothing here (the bench broke once on "status").
DEFAULTS = {f: MemoryChunk.model_fields[f].default for f in COLUMNS if f in MemoryChunk.model_fields}
ARTIFACT = ("diff --git a/docs/guide.md b/docs/guide.md\n+Explain the rollback procedure step by step. " * 12)[:1000]


@dataclass
class Histories:
    """Traces sorted by (chunk, N), unique per chunk, and the hybrid's summary of them."""

    owner: np.ndarray
    trace_n: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    recent: np.ndarray  # (chunks x K), ascending, -1 in empty slots (as MemoryIndex keeps it)
    count: np.ndarray
    created: np.ndarray


def histories(rng: np.random.Generator, n: int, now: int, lo: int, hi: int) -> Histories:
    owner = np.repeat(np.arange(n), rng.integers(lo, hi + 1, n))
    trace_n = rng.integers(0, now, owner.size)
    order = np.lexsort((trace_n, owner))
    owner, trace_n = owner[order], trace_n[order]
    keep = np.ones(owner.size, dtype=bool)  # the store keeps one trace per (chunk, N)
    keep[1:] = (owner[1:] != owner[:-1]) | (trace_n[1:] != trace_n[:-1])
    owner, trace_n = owner[keep], trace_n[keep]
    count = np.bincount(owner, minlength=n)
    ends = np.cumsum(count)
    starts = ends - count
    recent = np.full((n, K), -1, dtype=np.int64)
    for j in range(K):
        has = count > j
        recent[has, K - 1 - j] = trace_n[ends[has] - 1 - j]
    return Histories(owner, trace_n, starts, ends, recent, count, trace_n[starts])


@dataclass
class Corpus:
    n: int
    now: int
    ids: list[str]
    fields: dict[str, list[str]]
    hist: Histories
    traces: list[list[int]]
    pools: dict[str, np.ndarray]  # dim -> (POOL x DIM) unit float32
    pick: dict[str, np.ndarray]  # dim -> pool row per chunk, -1 = chunk lacks the dimension

    def vector(self, dim: str, i: int) -> np.ndarray | None:
        r = self.pick[dim][i]
        return None if r < 0 else self.pools[dim][r]


def unit(rng: np.random.Generator, *shape: int) -> np.ndarray:
    v = rng.standard_normal((*shape, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


_POOLS: dict[str, np.ndarray] = {}
_JSON_POOLS: dict[str, list[str]] = {}


def pools() -> dict[str, np.ndarray]:
    if not _POOLS:
        rng = np.random.default_rng(0)
        _POOLS.update({d: unit(rng, POOL) for d in PRESENCE})
    return _POOLS


def json_pools() -> dict[str, list[str]]:
    """The baseline's vectors as the old implementation wrote them: json.dumps(vec.tolist())."""
    if not _JSON_POOLS:
        _JSON_POOLS.update({d: [json.dumps(v.tolist()) for v in pools()[d]] for d in QUERY_DIMS})
    return _JSON_POOLS


def corpus(n: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    now = 2 * n  # the interaction counter runs ahead of the chunk count (retrievals, reinforcement)
    hist = histories(rng, n, now, 1, 20)
    tn = hist.trace_n.tolist()
    traces = [tn[s:e] for s, e in zip(hist.starts.tolist(), hist.ends.tolist())]
    fields = {f: [vals[j] for j in rng.choice(len(vals), n, p=p)] for f, (vals, p) in FIELD_VALUES.items()}
    pick = {d: np.where(rng.random(n) < share, rng.integers(0, POOL, n), -1) for d, share in PRESENCE.items()}
    for f in STRUCT_FIELDS:  # after the draws: the seeded corpus is the same as before
        fields.setdefault(f, [DEFAULTS[f]] * n)
    ids = [chunk_id_for("bench", f"wf-{i}") for i in range(n)]
    return Corpus(n, now, ids, fields, hist, traces, pools(), pick)


def chunk_row(c: Corpus, i: int) -> dict[str, object]:
    """A store row (vicar.memory.migrations.COLUMNS) with texts of realistic length."""
    f = {k: v[i] for k, v in c.fields.items()}
    return {
        **DEFAULTS,
        "id": c.ids[i],
        **f,
        "responder": "alice" if f["answered_by"] == "human" else None,
        "gate_id": f"gate-{i}",
        "question": f"Approve the {f['task_type']} deliverable of item {i}?",
        "artifact_excerpt": ARTIFACT if c.pick["artifact"][i] >= 0 else "",
        "actor_message": f"Item {i}: updated the guide and the rollback notes; please review." * 2,
        "upstream_agent": None,
        "prior_confidence": 0.5,
        "prior_prose": "Likely approve.",
        "posterior_confidence": 0.8,
        "posterior_prose": "Approve: matches earlier answers.",
        "surprise_description": "",
        "salient_percepts": "[]",
        "human_response": f"{f['outcome'].capitalize()}: keep the rollback section short.",
        "created_n": c.traces[i][0],
    }
