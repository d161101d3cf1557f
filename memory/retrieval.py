"""Retrieval: structural filter -> activation threshold -> ranking, top-k.

Rankings (selectable per call, for the design's ablations):
- composite: w_a * normalized activation + w_s * similarity (the default)
- activation: activation only;  similarity: similarity only
- recency: the most recently used chunks (recency-N), no decay model at all
Similarity is multi-dimensional (mean cosine over the dimensions present on both sides)
or the single blended embedding. Lexical BM25 results can be fused in by reciprocal
rank fusion. Activation can be exact or Petrov's hybrid, with seeded logistic noise and
spreading activation from co-retrieval.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from vicar.memory.activation import logistic_noise
from vicar.memory.index import MemoryIndex, single_threaded_blas

RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009)
BLENDED = "blended"


class RetrievalMode(str, Enum):
    composite = "composite"
    activation = "activation"
    similarity = "similarity"
    recency = "recency"


class EmbeddingMode(str, Enum):
    multi = "multi"
    blended = "blended"


class Query(BaseModel):
    now: int = Field(ge=0, description="Current interaction number N")
    # A field's value, or a list of values any of which matches (one search across kinds).
    filters: dict[str, str | list[str] | None] = Field(default_factory=dict)
    texts: dict[str, str] = Field(default_factory=dict, description="query text per dimension")
    mode: RetrievalMode = RetrievalMode.composite
    embedding: EmbeddingMode = EmbeddingMode.multi
    lexical: bool = False
    top_k: int | None = None
    # Seed for activation noise; None = no noise. Derive it from (principal, N) so a
    # retried retrieval returns the same memories.
    noise_seed: int | None = None


class Hit(BaseModel):
    chunk_id: str
    activation: float
    similarity: float | None
    score: float


class Params(Protocol):
    decay: float
    threshold: float
    age_floor: float
    w_activation: float
    w_similarity: float
    top_k: int
    noise_s: float
    spreading: bool
    spreading_weight: float
    spreading_seeds: int

    @property
    def activation_mode(self) -> str: ...  # read-only, so a Literal-typed field satisfies it


def rank(
    index: MemoryIndex,
    query: Query,
    query_vectors: dict[str, np.ndarray],
    params: Params,
    lexical_ranks: np.ndarray | None = None,
) -> list[Hit]:
    """Rank the principal's chunks for a query. `query_vectors` holds one vector per
    dimension (and 'blended'); `lexical_ranks[i]` is chunk i's BM25 rank (0 = best, -1 none)."""
    p = params
    idx = index.candidates(query.filters)
    if len(idx) == 0:
        return []
    act = index.activations(query.now, p.decay, p.age_floor, p.activation_mode)[idx]
    if query.noise_seed is not None and p.noise_s > 0:
        act = act + logistic_noise(np.random.default_rng(query.noise_seed), len(act), p.noise_s)
    alive = act > p.threshold
    idx, act = idx[alive], act[alive]
    if len(idx) == 0:
        return []

    if query.embedding is EmbeddingMode.blended:
        qv = {BLENDED: query_vectors[BLENDED]} if BLENDED in query_vectors else {}
    else:
        qv = {d: v for d, v in query_vectors.items() if d != BLENDED}
    with single_threaded_blas():
        sim = index.similarity(idx, qv) if qv else np.full(len(idx), np.nan)
    sim0 = np.nan_to_num(sim, nan=0.0)

    last = index.last_trace(idx) if query.mode is RetrievalMode.recency else None
    score = _score(query.mode, act, sim0, last, p)
    if p.spreading and query.mode in (RetrievalMode.composite, RetrievalMode.activation):
        # Chunks used together with the best candidates get a boost (Hebbian co-access).
        seeds = idx[np.argsort(-score)[: p.spreading_seeds]]
        boost = index.spread(seeds, idx)
        if boost.any():
            act = act + p.spreading_weight * boost
            score = _score(query.mode, act, sim0, last, p)

    if lexical_ranks is not None:
        score = _rrf(score, idx, lexical_ranks)

    k = min(query.top_k or p.top_k, len(idx))
    top = np.argpartition(-score, k - 1)[:k] if k < len(idx) else np.arange(len(idx))
    top = top[np.lexsort((-idx[top], -score[top]))]  # score, then the newer chunk first
    return [
        Hit(
            chunk_id=index.ids[idx[j]],
            activation=float(act[j]),
            similarity=None if np.isnan(sim[j]) else float(sim[j]),
            score=float(score[j]),
        )
        for j in top
    ]


def _score(mode: RetrievalMode, act: np.ndarray, sim0: np.ndarray, last: np.ndarray | None, p: Params) -> np.ndarray:
    if mode is RetrievalMode.activation:
        return act
    if mode is RetrievalMode.similarity:
        return sim0
    if mode is RetrievalMode.recency:
        assert last is not None  # the caller reads the last-use column for this mode
        return last.astype(np.float64)
    span = act.max() - act.min()
    act_norm = (act - act.min()) / span if span > 0 else np.ones_like(act)
    return p.w_activation * act_norm + p.w_similarity * sim0


def _rrf(dense_score: np.ndarray, idx: np.ndarray, lexical_ranks: np.ndarray) -> np.ndarray:
    """Reciprocal rank fusion of the dense ranking with the lexical one, k = 60.
    A candidate missing from the lexical results gets only its dense term."""
    dense_rank = np.empty(len(idx), dtype=np.int64)
    dense_rank[np.argsort(-dense_score, kind="stable")] = np.arange(len(idx))
    fused = 1.0 / (RRF_K + 1 + dense_rank)
    lex = lexical_ranks[idx]
    has = lex >= 0
    fused[has] += 1.0 / (RRF_K + 1 + lex[has])
    return fused
