"""Semantic facts of one human (docs/design/memory-types.md): preferences and procedures, each with
a confidence and a lifecycle. The fact's words are a chunk of their own kind, retrieved
beside the episodes; this record keeps what a chunk does not."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

FactKind = Literal["preference", "procedure"]
# learned -> confirmed -> superseded (by `successor`) | deactivated (disconfirmed).
Stage = Literal["learned", "confirmed", "superseded", "deactivated"]
LIVE_STAGES = ("learned", "confirmed")


class Fact(BaseModel):
    id: str  # its chunk's id
    kind: FactKind
    state: str
    task_type: str
    subject: str  # what it is about: a concern word of the human's ("rollback")
    text: str  # the fact in the human's own words
    confidence: float = Field(ge=0.0, le=1.0)
    stage: Stage = "learned"
    successor: str | None = None
    provenance: list[str] = Field(default_factory=list)  # the chunks it was learned from
    confirmations: int = 0
    disconfirmations: int = 0
    activations: int = 0  # gates it was offered at (procedures: how often the routine applied)
    created_n: int
    updated_n: int

    @property
    def live(self) -> bool:
        return self.stage in LIVE_STAGES
