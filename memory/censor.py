"""The censor (docs/design/memory-types.md, a kind of procedure): a learned constraint that keeps the
proxy from answering alone on artifacts like those the human keeps turning back."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

CENSOR_DIMS = ("artifact", "stimulus")  # what makes two artifacts "the same kind"

CensorAction = Literal["warn", "block"]
CensorStatus = Literal["active", "disabled", "deactivated"]  # disabled: by an operator


class Censor(BaseModel):
    id: str
    kind: str
    state: str
    task_type: str
    pattern: str  # the trigger as a person reads it: the context and an excerpt of the artifacts
    reason: str  # why: the human's own words when they gave any
    provenance: list[str]  # the chunks (human corrections and rejections) it was learned from
    # The trigger's embedding per dimension: the normalized mean of its provenance's vectors.
    vectors: dict[str, list[float]] = Field(default_factory=dict)
    action: CensorAction = "block"
    severity: float = 1.0
    status: CensorStatus = "active"
    activations: int = 0  # gates it fired on
    confirmations: int = 0  # ... that the human then corrected or rejected
    false_positives: int = 0  # ... that the human then approved
    created_n: int
    updated_n: int

    @property
    def live(self) -> bool:
        return self.status == "active"

    def similarity(self, query: dict[str, np.ndarray]) -> float | None:
        """Mean cosine over the dimensions both have (the index's rule); None: none shared."""
        sims = [
            float(np.dot(np.asarray(self.vectors[d], dtype=np.float32), q))
            for d, q in query.items()
            if d in self.vectors
        ]
        return sum(sims) / len(sims) if sims else None


def trigger_vectors(vectors: list[dict[str, np.ndarray]]) -> dict[str, list[float]]:
    """The normalized mean per dimension of the given chunks' vectors."""
    out: dict[str, list[float]] = {}
    for dim in CENSOR_DIMS:
        rows = [v[dim] for v in vectors if dim in v]
        if rows:
            mean = np.mean(np.stack(rows), axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                out[dim] = [round(float(x), 6) for x in mean / norm]
    return out
