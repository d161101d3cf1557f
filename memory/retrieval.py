"""Retrieval: structural filter -> activation threshold -> composite of normalized
activation and semantic similarity, top-k."""

from __future__ import annotations

from enum import Enum

import numpy as np
from pydantic import BaseModel, Field

from memory.index import MemoryIndex


class RetrievalMode(str, Enum):
    composite = "composite"
    activation = "activation"
    similarity = "similarity"


class Query(BaseModel):
    now: int = Field(ge=0, description="Current interaction number N")
    filters: dict[str, str | None] = Field(default_factory=dict)
    texts: dict[str, str] = Field(default_factory=dict, description="query text per dimension")
    mode: RetrievalMode = RetrievalMode.composite
    top_k: int | None = None


class Hit(BaseModel):
    chunk_id: str
    activation: float
    similarity: float | None
    score: float


def rank(
    index: MemoryIndex,
    query: Query,
    query_vectors: dict[str, np.ndarray],
    *,
    decay: float,
    threshold: float,
    age_floor: float,
    w_activation: float,
    w_similarity: float,
    top_k: int,
) -> list[Hit]:
    idx = index.candidates(query.filters)
    if len(idx) == 0:
        return []
    act = index.activations(query.now, decay, age_floor)[idx]
    alive = act > threshold
    idx, act = idx[alive], act[alive]
    if len(idx) == 0:
        return []
    sim = index.similarity(idx, query_vectors) if query_vectors else np.full(len(idx), np.nan)

    span = act.max() - act.min()
    act_norm = (act - act.min()) / span if span > 0 else np.ones_like(act)
    sim0 = np.nan_to_num(sim, nan=0.0)
    if query.mode is RetrievalMode.activation:
        score = act_norm
    elif query.mode is RetrievalMode.similarity:
        score = sim0
    else:
        score = w_activation * act_norm + w_similarity * sim0

    k = min(query.top_k or top_k, len(idx))
    top = np.argpartition(-score, k - 1)[:k] if k < len(idx) else np.arange(len(idx))
    # Stable order: score, then the newer chunk first.
    top = sorted(top, key=lambda j: (-score[j], -int(idx[j])))
    return [
        Hit(
            chunk_id=index.ids[idx[j]],
            activation=float(act[j]),
            similarity=None if np.isnan(sim[j]) else float(sim[j]),
            score=float(score[j]),
        )
        for j in top
    ]
