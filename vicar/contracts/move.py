"""The move's contract (workflows/move.py): a principal's memory moved to another shard
under the principal's turn, in pieces, verified before the brain's shard changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio.common import RetryPolicy

from vicar.contracts.brain import HOLDER_SIGNALS, SET_SHARD_UPDATE
from vicar.contracts.handles import Handles
from vicar.memory.transfer import Snapshot

MOVE_WORKFLOW = "VicarMove"
MOVE_HANDLES = Handles(MOVE_WORKFLOW, signals=HOLDER_SIGNALS)


def move_workflow_id(principal: str) -> str:
    return f"vicar-move/{principal}"


# Activities, each on the shard it reads or writes:
EXPORT_MEMORY = "export_memory"  # MoveStep -> Snapshot (the old shard)
EXPORT_PIECE = "export_piece"  # MovePiece -> MovePiece with its data (the old shard)
IMPORT_PIECE = "import_piece"  # MovePiece -> int (the new shard)
INSTALL_MEMORY = "install_memory"  # MoveInstall -> outcome count (the new shard, verified)
REMOVE_MEMORY = "remove_memory"  # MoveStep -> None (the old shard, once the brain's shard changed)
SET_SHARD = SET_SHARD_UPDATE  # ShardChange -> bool: the activity is named after the update it sends
MOVE_ACTIVITIES = (EXPORT_MEMORY, EXPORT_PIECE, IMPORT_PIECE, INSTALL_MEMORY, REMOVE_MEMORY, SET_SHARD)

# Every step waits for its shard's owner however long, and is idempotent.
_UNTIL_DONE = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1))
MOVE_OPTIONS: dict[str, Any] = dict(start_to_close_timeout=timedelta(minutes=10), retry_policy=_UNTIL_DONE)
# A piece is 256 KB: an attempt lost with its worker is tried again after this long.
PIECE_OPTIONS: dict[str, Any] = dict(start_to_close_timeout=timedelta(seconds=20), retry_policy=_UNTIL_DONE)


class MoveInput(BaseModel):
    principal: str
    to_shard: int = Field(ge=0)
    # Carried across continue-as-new while the pieces go over:
    move_id: str = ""
    from_shard: int | None = None
    snapshot: Snapshot | None = None
    next_piece: int = 0


class MoveStep(BaseModel):
    principal: str
    move_id: str


class MovePiece(BaseModel):
    principal: str
    move_id: str
    index: int
    data: str = ""  # base64: the payload converter writes JSON


class MoveInstall(BaseModel):
    principal: str
    move_id: str
    snapshot: Snapshot


class MoveReport(BaseModel):
    principal: str
    from_shard: int | None
    to_shard: int
    moved: bool  # False: it was there already
    outcomes: int = 0
    archive_bytes: int = 0
