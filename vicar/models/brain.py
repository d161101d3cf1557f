"""What the principal's brain (its FIFO of turns and the interaction counter N) takes,
keeps and answers: turn requests, replies and grants, its configuration, state and
status. Pydantic only: importable in the workflow sandbox."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from vicar.memory.names import check_principal
from vicar.models.control import Control


class TurnRequest(BaseModel):
    gate_id: str
    workflow_id: str
    # Which of the holder's asks this is (TurnAsk.attempt), echoed on the grant so a
    # grant delivered before its ask's reply is not mistaken for a stale one (None: a
    # holder from before TURN_GRANT_FOR_ASK).
    ask: int | None = None


class TurnReply(BaseModel):
    n: int | None  # granted at once with this N, or None: queued, a signal will follow
    error: str | None = None  # refused: the brain could not read or mirror the counter (a broken store)
    shard: int | None = None  # the shard holding the principal's memory (None: unsharded)
    # Give the turn back by `release_turn` even after recording: others were waiting when
    # it was granted. False only from brains that read the record as the release, so a
    # reply from an older brain (no field) keeps the signal.
    release: bool = True
    # The principal's rules and pauses as the turn is granted (None: none, or a brain
    # older than them): the gate obeys them, so a change holds from the next gate on.
    control: Control | None = None


class TurnGrant(BaseModel):
    gate_id: str
    n: int | None  # None only with an error
    error: str | None = None  # refused (see TurnReply.error): no N was handed out
    shard: int | None = None  # see TurnReply.shard
    release: bool = True  # see TurnReply.release
    control: Control | None = None  # see TurnReply.control
    ask: int | None = None  # the TurnRequest.ask this grant answers


class BrainConfig(BaseModel):
    # A gate that dies holding the turn loses it after this long.
    lease_seconds: float = 600.0
    # Continue-as-new after this many grants, well before Temporal's history limits
    # (about 2,000 updates / 50k events per run).
    max_grants_per_run: int = 500
    # Gate -> N entries carried across continue-as-new (update ids don't dedupe across runs).
    remembered_gates: int = 2000
    # Sharded memory (vicar.runtime.sharding): the deployment's shard count (None: unsharded)
    # and how long the counter's activities wait for the shard's owner.
    shard_count: int | None = None
    shard_wait_seconds: float = 60.0


class BrainState(BaseModel):
    counter: int = 0
    queue: list[TurnRequest] = Field(default_factory=list)
    holder: TurnRequest | None = None
    holder_n: int | None = None
    lease_deadline: float | None = None  # workflow time, seconds since epoch
    assigned: list[tuple[str, int]] = Field(default_factory=list)  # ordered gate_id -> N
    shard: int | None = None  # where the principal's memory lives (set once; changed only by a move)
    control: Control = Field(default_factory=Control)  # the human's rules and pauses (vicar/models/control.py)


class BrainInput(BaseModel):
    principal: str
    config: BrainConfig = Field(default_factory=BrainConfig)
    state: BrainState | None = None

    @model_validator(mode="after")
    def _principal(self) -> "BrainInput":
        check_principal(self.principal)
        return self


class BrainStatus(BaseModel):
    principal: str
    counter: int
    queued: list[str]
    holder: str | None
    run_grants: int
    shard: int | None = None
