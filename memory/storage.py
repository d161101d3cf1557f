"""The storage decision for a new gate chunk (docs/design/retrieval-pipelines-addendum.md, pipeline 1):
persist, reinforce, buffer or drop, from the addendum's 3x3 grid of relevance and novelty.

- Novelty: from the nearest chunk of the same context (kind, state, task type, who
  answered) by mean cosine over every dimension both have. High below
  `storage_novel_below`; low at or above `storage_duplicate_at` with the same answer (a
  duplicate); mid between.
- Relevance: how alive that region of memory is, the nearest chunk's base-level
  activation at N against the retrieval threshold tau: high at `storage_relevance_high`
  or more above it, mid at `storage_relevance_mid`, low below (a region retrieval is
  losing).

A human's correction or rejection always persists: they are the rare evidence censors
and preferences learn from. Whatever the decision, the chunk's record is stored (its
outcome, lineage and words: the bookkeeping, the lineage history and the audit need
them); the decision is about the retrieval index. A reinforced chunk adds a trace to
its duplicate instead (ACT-R: the same item presented again) and keeps no vectors; a
dropped one keeps none either; a buffered one is retrievable until the session's
consolidation, which keeps it only if it was met again (a trace after its creation).
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel

from vicar.memory.chunk import ChunkKind, MemoryChunk
from vicar.memory.index import MemoryIndex, single_threaded_blas

Op = Literal["persist", "reinforce", "buffer", "drop"]
Level = Literal["low", "mid", "high"]
RETRIEVABLE = ["active", "buffered"]  # the statuses retrieval searches
UNINDEXED = ("merged", "dropped")  # records without vectors: out of the index for good
ALWAYS_KEPT = ("correct", "reject")  # a human's reversal always persists

# (novelty, relevance) -> decision.
GRID: dict[tuple[Level, Level], Op] = {
    ("high", "high"): "persist",
    ("high", "mid"): "persist",
    ("high", "low"): "persist",
    ("mid", "high"): "persist",
    ("mid", "mid"): "buffer",
    ("mid", "low"): "buffer",
    ("low", "high"): "reinforce",
    ("low", "mid"): "reinforce",
    ("low", "low"): "drop",
}


class StorageParams(Protocol):
    decay: float
    threshold: float
    age_floor: float
    storage_novel_below: float
    storage_duplicate_at: float
    storage_relevance_high: float
    storage_relevance_mid: float

    @property
    def activation_mode(self) -> str: ...  # read-only, so a Literal-typed field satisfies it


class StorageDecision(BaseModel):
    op: Op
    novelty: Level
    relevance: Level
    nearest: str | None = None
    similarity: float | None = None
    activation: float | None = None


def decide(
    index: MemoryIndex, chunk: MemoryChunk, vectors: dict[str, np.ndarray], now: int, params: StorageParams
) -> StorageDecision:
    if chunk.kind is not ChunkKind.gate or (chunk.answered_by == "human" and chunk.outcome in ALWAYS_KEPT):
        return StorageDecision(op="persist", novelty="high", relevance="high")
    idx = index.candidates(
        {
            "kind": chunk.kind.value,
            "state": chunk.state,
            "task_type": chunk.task_type,
            "answered_by": chunk.answered_by,
            "status": RETRIEVABLE,
        }
    )
    if len(idx) == 0 or not vectors:
        return StorageDecision(op="persist", novelty="high", relevance="high")
    with single_threaded_blas():
        sim = np.nan_to_num(index.similarity(idx, vectors), nan=-1.0)
    j = int(np.argmax(sim))
    best, nearest = float(sim[j]), index.ids[idx[j]]
    act = float(index.activations(now, params.decay, params.age_floor, params.activation_mode)[idx[j]])
    same_answer = index.field_value(idx[j], "outcome") == chunk.outcome
    novelty: Level = (
        "low"
        if best >= params.storage_duplicate_at and same_answer
        else "high"
        if best < params.storage_novel_below
        else "mid"
    )
    above = act - params.threshold
    relevance: Level = (
        "high" if above >= params.storage_relevance_high else "mid" if above >= params.storage_relevance_mid else "low"
    )
    return StorageDecision(
        op=GRID[(novelty, relevance)],
        novelty=novelty,
        relevance=relevance,
        nearest=nearest,
        similarity=round(best, 4),
        activation=round(act, 4),
    )
