"""The memory's parameters (vicar.settings.Settings carries them, from the environment)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class MemoryParams(BaseModel):
    """ACT-R and retrieval parameters.

    d, tau, s and the score weights come from the replay evaluation's sweep on the
    shared dev data (bench/replay/report.md: 3,709 gates of 4 real reviewers,
    coordinate search by macro-F1): d = 0.5 (0.3: 0.365, 0.5: 0.368, 0.7: 0.366),
    tau = -5.0 (-1.5 forgets too much: 0.309), s = 0.25 (0.368 vs 0.360 without noise),
    w_activation / w_similarity = 0.25 / 0.75 (0.368 vs 0.343 at 0.5 / 0.5).
    - age_floor = 1: a trace made at the current N counts as one interaction old, so
      ln(0^-d) never occurs.
    - activation "exact": the hybrid (Petrov 2006, k = 3) bounds memory per chunk and
      is within 0.02 of exact on regular long histories, but errs up to 0.11 on long
      Poisson-random ones and 0.23 on short random ones (tests/test_activation.py,
      bench/MEMORY_RESULTS.md), so exact stays the default.
    - noise is seeded by (principal, N, phase), so a retried retrieval is identical.
    - spreading off (not yet evaluated); weight 1.0 over the top 3 seeds when on.
    """

    decay: float = 0.5
    threshold: float = -5.0
    age_floor: float = 1.0
    w_activation: float = 0.25
    w_similarity: float = 0.75
    top_k: int = 10
    activation_mode: Literal["exact", "hybrid"] = "exact"
    hybrid_k: int = 3
    noise_s: float = 0.25
    # The storage decision for new gate chunks (memory/storage.py): off keeps every one.
    storage: bool = False
    storage_novel_below: float = Field(0.8, gt=0.0, le=1.0)  # nearest similarity below: novel
    storage_duplicate_at: float = Field(0.97, gt=0.0, le=1.0)  # at or above, same answer: a duplicate
    # Relevance: the nearest chunk's activation this far above tau is high, this far mid
    # (with d 0.5 and one trace: younger than ~55 and ~1,100 interactions).
    storage_relevance_high: float = 3.0
    storage_relevance_mid: float = 1.5
    spreading: bool = False
    spreading_weight: float = 1.0
    spreading_seeds: int = 3
    # Embed each chunk's blended text too. Only the blended retrieval mode reads those
    # vectors, and they cost a gate its largest single piece of CPU (one more run of the
    # model on the longest text, ~30 ms of ~68 ms of the proxy's work: bench/RESULTS.md),
    # so Settings keeps them only when retrieval.embedding is "blended". A memory opened
    # with them on that lacks some embeds them then (PrincipalMemory's open).
    blended_vectors: bool = True


EMBEDDERS = ("minilm", "minilm-torch", "openai")


class EmbedderParams(BaseModel):
    """Which embedding model (VICAR_EMBEDDER and its neighbours, read by vicar.settings:
    memory/ reads no environment)."""

    name: Literal["minilm", "minilm-torch", "openai"] = "minilm"
    threads: int = Field(1, ge=1)  # onnxruntime's threads per call
    openai_model: str = "text-embedding-3-small"
