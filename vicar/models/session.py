"""What a working session and its consolidation take, keep and answer: the session's
configuration and input, the working-memory view, a gate joining, the gates it saw and
its summary. Pydantic only: importable in the workflow sandbox."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from vicar.memory.consolidation_plan import ConsolidationReport
from vicar.memory.names import check_principal
from vicar.models.usage import Usage
from vicar.models.vocabulary import AnsweredBy


class SessionConfig(BaseModel):
    # The session ends after this long with no gate joining or finishing (a durable timer).
    idle_timeout_seconds: float = 1800.0
    # The working-memory block's size: top chunks by activation until this many tokens.
    token_budget: int = 2000
    # Consolidation's apply step heartbeats per decision; a dead worker's attempt is
    # retried after this long.
    consolidation_heartbeat_seconds: float = 30.0


class SessionInput(BaseModel):
    principal: str
    session_id: str
    config: SessionConfig = Field(default_factory=SessionConfig)
    # Where the principal's memory is when the session starts (see TurnReply.shard).
    shard: int | None = None
    shard_wait_seconds: float = 60.0

    @model_validator(mode="after")
    def _principal(self) -> "SessionInput":
        check_principal(self.principal)
        return self


class WorkingMemoryView(BaseModel):
    """What the session keeps of its working memory (the loader's result)."""

    n: int
    block: str
    chunk_ids: list[str] = Field(default_factory=list)
    tokens: int = 0
    budget: int = 0
    above_threshold: int = 0


class SessionJoin(BaseModel):
    gate_id: str
    workflow_id: str


class JoinReply(BaseModel):
    working_memory: str
    n: int  # the counter the working memory was computed at


class SessionGate(BaseModel):
    gate_id: str
    workflow_id: str
    done: bool = False
    escalated: bool | None = None
    answered_by: AnsweredBy | None = None
    usage: Usage = Field(default_factory=Usage)


class ConsolidationInput(BaseModel):
    principal: str
    session_id: str
    gate_workflow_ids: list[str] = Field(default_factory=list)
    heartbeat_seconds: float = 30.0


class SessionSummary(BaseModel):
    principal: str
    session_id: str
    status: str  # loading | open | consolidating | done
    ended_by: str | None = None  # "signal" | "idle"
    n_at_start: int | None = None
    working_memory_tokens: int = 0
    working_memory_chunks: int = 0
    gates: list[SessionGate] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    consolidation: ConsolidationReport | None = None
