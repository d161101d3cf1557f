"""What consolidation decides for a session's new chunks, and what applying it did: the
records a consolidation activity passes and returns."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ConsolidationDecision(BaseModel):
    decision_id: str
    op: str  # ADD | UPDATE | DELETE | SKIP
    chunk_id: str  # the session's new chunk
    target_id: str | None = None  # the existing chunk it was judged against
    superseded: str | None = None  # the chunk this decision marks superseded
    conflict: str | None = None  # the triage's class for disagreeing pairs
    similarity: float | None = None
    reason: str


class ConsolidationPlan(BaseModel):
    session_id: str
    decisions: list[ConsolidationDecision] = Field(default_factory=list)


class ConsolidationReport(BaseModel):
    session_id: str
    applied: int = 0  # decisions applied by this run (0 for one already done)
    counts: dict[str, int] = Field(default_factory=dict)
    superseded: list[str] = Field(default_factory=list)
    tensions: int = 0
    facts_learned: int = 0  # preferences and procedures learned from the session's contexts
    buffer_kept: int = 0  # buffered chunks met again in the session: kept (memory/storage.py)
    buffer_dropped: int = 0  # ... not met again: out of the index
