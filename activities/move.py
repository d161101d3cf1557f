"""Moving a principal's memory to another shard: the old owner archives and serves
pieces, the new owner writes them and installs a verified copy, the old owner removes
its copy last. Each step is idempotent (memory/transfer.py)."""

from __future__ import annotations

import base64

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.errors import INVALID_STEP_INPUT, TRANSFER_ERROR
from vicar.memory import transfer
from vicar.memory.errors import InvalidInput
from vicar.memory.names import child_path
from vicar.memory.registry import MemoryRegistry
from vicar.settings import Settings


class MoveActivities:
    def __init__(self, client: Client, registry: MemoryRegistry, settings: Settings, forget=None) -> None:
        self.client = client
        self.registry = registry
        self.settings = settings
        self.forget = forget  # drops what the predictor keeps of a principal (a learned model's history)

    def shared(self) -> list:
        return [self.set_shard]

    def memory(self) -> list:
        return [self.export_memory, self.export_piece, self.import_piece, self.install_memory, self.remove_memory]

    # Every step checks its ids here, whoever started the move: a move id or principal
    # that leaves the data directory would have its staging written and then deleted.
    def _staging(self, move_id: str):
        try:
            return child_path(self.settings.data_dir / "moves", move_id, "move id")
        except InvalidInput as exc:
            raise self._invalid(exc) from None

    def _memory_dir(self, principal: str):
        try:
            return child_path(self.settings.principals_dir, principal)
        except InvalidInput as exc:
            raise self._invalid(exc) from None

    def _invalid(self, exc: InvalidInput) -> ApplicationError:
        return ApplicationError(f"invalid move step: {exc}", type=INVALID_STEP_INPUT, non_retryable=True)

    def _let_go(self, principal: str) -> None:
        """Close the principal's memory here: its files are about to be archived, replaced
        or removed, and nothing this process cached of it may be used again."""
        self.registry.release(principal)
        if self.forget:
            self.forget(principal)

    def _refuse(self, exc: transfer.TransferError) -> ApplicationError:
        return ApplicationError(str(exc), type=TRANSFER_ERROR, non_retryable=True)

    @activity.defn(name=c.EXPORT_MEMORY)
    def export_memory(self, step: c.MoveStep) -> transfer.Snapshot:
        memory_dir, staging = self._memory_dir(step.principal), self._staging(step.move_id)
        self._let_go(step.principal)
        try:
            return transfer.snapshot(memory_dir, staging)
        except transfer.TransferError as exc:
            raise self._refuse(exc) from None

    @activity.defn(name=c.EXPORT_PIECE)
    def export_piece(self, piece: c.MovePiece) -> c.MovePiece:
        data = transfer.read_piece(self._staging(piece.move_id), piece.index)
        return piece.model_copy(update={"data": base64.b64encode(data).decode()})

    @activity.defn(name=c.IMPORT_PIECE)
    def import_piece(self, piece: c.MovePiece) -> int:
        staging = self._staging(piece.move_id)
        data = base64.b64decode(piece.data)
        transfer.write_piece(staging, piece.index, data)
        return len(data)

    @activity.defn(name=c.INSTALL_MEMORY)
    def install_memory(self, inp: c.MoveInstall) -> int:
        memory_dir, staging = self._memory_dir(inp.principal), self._staging(inp.move_id)
        self._let_go(inp.principal)  # a copy from an earlier stay here may be open
        try:
            return transfer.install(staging, memory_dir, inp.snapshot)
        except transfer.TransferError as exc:
            raise self._refuse(exc) from None

    @activity.defn(name=c.REMOVE_MEMORY)
    def remove_memory(self, step: c.MoveStep) -> None:
        memory_dir, staging = self._memory_dir(step.principal), self._staging(step.move_id)
        self._let_go(step.principal)
        transfer.remove(memory_dir, staging)

    @activity.defn(name=c.SET_SHARD)
    async def set_shard(self, change: c.ShardChange) -> bool:
        return await self.client.get_workflow_handle(c.brain_workflow_id(change.principal)).execute_update(
            c.SET_SHARD_UPDATE, change, result_type=bool
        )
