"""The brain's contract (workflows/brain.py): one workflow per principal that owns the
interaction counter and hands out the principal's turn; the turn protocol it serves is
described in workflows/turn.py. Names here are in history, so renaming one breaks
running workflows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.common import RetryPolicy

from vicar.contracts.handles import Handles
from vicar.models.brain import BrainConfig, TurnRequest
from vicar.models.control import Control

BRAIN_WORKFLOW = "VicarBrain"
TAKE_TURN_UPDATE = "take_turn"
REQUEST_TURN_SIGNAL = "request_turn"
RELEASE_TURN_SIGNAL = "release_turn"
SET_SHARD_UPDATE = "set_shard"
BRAIN_STATUS_QUERY = "status"
# The human's rules and pauses (vicar/models/control.py): changed by the update, read by the query.
CONTROL_UPDATE = "control"
CONTROL_QUERY = "control_state"
# The brain continues as new when a write comes sealed with another key than its run's
# input (workflows/sealed.py KeyWatch), so a rotated-out key can be dropped; this signal
# (any one sealed argument: who asks) is that write for an idle brain.
REKEY_SIGNAL = "rekey"
# What the brain sends a turn's holder (the gate, a consolidation, a move).
TURN_GRANTED_SIGNAL = "turn_granted"
TURN_WANTED_SIGNAL = "turn_wanted"
HOLDER_SIGNALS = (TURN_GRANTED_SIGNAL, TURN_WANTED_SIGNAL)

BRAIN_HANDLES = Handles(
    BRAIN_WORKFLOW,
    signals=(REQUEST_TURN_SIGNAL, RELEASE_TURN_SIGNAL, REKEY_SIGNAL),
    updates=(TAKE_TURN_UPDATE, SET_SHARD_UPDATE, CONTROL_UPDATE),
    queries=(BRAIN_STATUS_QUERY, CONTROL_QUERY),
)


def brain_workflow_id(principal: str) -> str:
    return f"vicar-brain/{principal}"


# Activities. A holder asks (sent as the update, or queued as the signal) and gives back:
REQUEST_TURN = REQUEST_TURN_SIGNAL  # TurnAsk -> TurnTicket
RELEASE_TURN = RELEASE_TURN_SIGNAL  # TurnAsk -> None
# The brain's counter, on the memory's shard:
READ_COUNTER = "read_counter"  # CounterInput -> int
ADVANCE_TURN = "advance_turn"  # TurnAdvance -> TurnAdvanced
# The brain keeps its rules and pauses in the principal's store after each change
# (KEEP_CONTROL: ControlKeep -> bool) and takes them back when it starts afresh
# (LOAD_CONTROL: CounterInput -> Control | None).
KEEP_CONTROL = "keep_control"
LOAD_CONTROL = "load_control"
# The brain's activities, all of them (the turn's asks included, which holders send).
BRAIN_ACTIVITIES = (REQUEST_TURN, RELEASE_TURN, READ_COUNTER, ADVANCE_TURN, KEEP_CONTROL, LOAD_CONTROL)

# A quick client call (the turn's asks, a session join, a move's shard change): a local
# activity, no extra workflow task.
QUICK_OPTIONS: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=5)),
)
# Reading and mirroring the counter: a few quick attempts for a busy file, then the turn
# is refused with the reason (a corrupt store fails at once: non-retryable). Unbounded
# retries held every gate of the principal `queued` for ever, and a local activity that
# never finishes also kept the worker from shutting down. The brain itself never fails:
# the next request reads the store again, so a repaired store is picked up.
COUNTER_OPTIONS: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=4
    ),
)


class TurnAsk(BaseModel):
    principal: str
    turn: TurnRequest
    config: BrainConfig | None = None  # None: the worker's default
    # Asked again after a refusal (a broken memory): a new update id, since the brain
    # run deduplicates an update id and would repeat the refusal.
    attempt: int = 0


class TurnTicket(BaseModel):
    """What the worker tells a holder when it queues it: how to run the proxy's steps."""

    local_steps: bool
    n: int | None = None  # granted at once; None: wait for the brain's turn_granted signal
    error: str | None = None  # refused: the principal's memory is unavailable (no N)
    max_dialog_turns: int = 5
    shard: int | None = None  # the memory's shard when granted at once (else on the grant)
    shard_wait_seconds: float = 60.0  # how long a memory step waits for the shard's owner
    release: bool = True  # see TurnReply.release (when granted at once)
    deadline_seconds: float = 0.0  # the worker's default gate deadline (0: none)
    control: Control | None = None  # the human's rules and pauses when granted at once (TurnReply.control)


class CounterInput(BaseModel):
    principal: str
    n: int = 0


class TurnAdvance(BaseModel):
    """Hand out `n` (mirror it) only if the turn is free: `after`, the workflow that
    holds it, has recorded its outcome (None: nobody holds it). n None: only ask."""

    principal: str
    n: int | None = None
    after: str | None = None


class TurnAdvanced(BaseModel):
    free: bool  # `after` has recorded (or nobody held the turn); when False nothing was mirrored
    counter: int  # the stored counter afterwards


class ControlKeep(BaseModel):
    principal: str
    control: Control


class ShardChange(BaseModel):
    principal: str
    turn: TurnRequest  # only the turn's holder may change the shard
    shard: int
