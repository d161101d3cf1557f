"""Moving a principal's memory to another shard, under the principal's brain turn (no
gate reads or writes it meanwhile): archive on the old shard, pieces to the new one,
install there (verified: size, sha256, SQLite integrity, outcome count), then the
brain's shard changes, and only then is the old copy removed. Every step waits for its
shard's owner however long, and is idempotent, so a move interrupted by a crash goes on
where it stopped."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.errors import INVALID_MOVE_INPUT
    from vicar.memory.errors import InvalidInput
    from vicar.memory.names import check_name, check_principal
    from vicar.memory.transfer import Snapshot
    from vicar.models import TurnRequest
    from vicar.runtime.sharding import MAX_SHARDS
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.turn import Turn

# Pieces per run: each passes through history twice (about 0.7 MB per piece, base64).
PIECES_PER_RUN = 16


def _check(inp: c.MoveInput) -> None:
    """Checked before any step: its principal and move id become paths on the shards'
    disks, and a move started by hand must not reach outside the data directory (the
    activities check again)."""
    check_principal(inp.principal)
    if inp.move_id:
        check_name(inp.move_id, "move id")
    if inp.to_shard >= MAX_SHARDS or (inp.from_shard or 0) < 0 or inp.next_piece < 0:
        raise InvalidInput(f"shards run from 0 to {MAX_SHARDS - 1} and pieces from 0")
    # What a run carries to the next is not for a first run to set: a snapshot given
    # would skip the archive the install is checked against, a move id chosen could
    # share another move's staging directory.
    if not workflow.info().continued_run_id and (
        inp.move_id or inp.snapshot is not None or inp.from_shard is not None or inp.next_piece
    ):
        raise InvalidInput("move_id, snapshot, from_shard and next_piece are carried between runs, not given")


@workflow.defn(name=c.MOVE_WORKFLOW)
class MoveWorkflow:
    def __init__(self) -> None:
        self.turn = Turn()

    @workflow.signal(name=c.TURN_GRANTED_SIGNAL)
    @raw_argument
    def turn_granted(self, *args: RawValue) -> None:
        self.turn.granted(args)

    @workflow.signal(name=c.TURN_WANTED_SIGNAL)
    @raw_argument
    def turn_wanted(self, *args: RawValue) -> None:
        self.turn.want(args)

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> c.MoveReport:
        # A bad input fails the workflow at once, non-retryable, in one line, where a
        # failed conversion would fail its task again and again.
        inp = one_input(args, c.MoveInput, "move input", _check, error_type=INVALID_MOVE_INPUT)
        move_id = inp.move_id or str(workflow.uuid4())
        ask = c.TurnAsk(
            principal=inp.principal,
            turn=TurnRequest(gate_id=f"move/{move_id}", workflow_id=workflow.info().workflow_id),
        )
        # The holder asking again (a new run) keeps its turn.
        shard = await self.turn.take(ask, f"move of {inp.principal}")
        from_shard = inp.from_shard if inp.from_shard is not None else shard
        if from_shard == inp.to_shard or shard is None:
            await self.turn.release(ask)
            return c.MoveReport(principal=inp.principal, from_shard=shard, to_shard=inp.to_shard, moved=False)
        step = c.MoveStep(principal=inp.principal, move_id=move_id)
        snap = inp.snapshot or await run_memory_activity(
            c.EXPORT_MEMORY, step, Snapshot, c.MOVE_OPTIONS, shard=from_shard
        )
        for i in range(inp.next_piece, snap.pieces):
            if i - inp.next_piece == PIECES_PER_RUN:
                # The turn stays with this workflow id across runs.
                workflow.continue_as_new(
                    inp.model_copy(update=dict(move_id=move_id, from_shard=from_shard, snapshot=snap, next_piece=i))
                )
            piece = await run_memory_activity(
                c.EXPORT_PIECE,
                c.MovePiece(principal=inp.principal, move_id=move_id, index=i),
                c.MovePiece,
                c.PIECE_OPTIONS,
                shard=from_shard,
            )
            await run_memory_activity(c.IMPORT_PIECE, piece, int, c.PIECE_OPTIONS, shard=inp.to_shard)
        outcomes = await run_memory_activity(
            c.INSTALL_MEMORY,
            c.MoveInstall(principal=inp.principal, move_id=move_id, snapshot=snap),
            int,
            c.MOVE_OPTIONS,
            shard=inp.to_shard,
        )
        changed = await workflow.execute_local_activity(
            c.SET_SHARD,
            c.ShardChange(principal=inp.principal, turn=ask.turn, shard=inp.to_shard),
            result_type=bool,
            **c.QUICK_OPTIONS,
        )
        if not changed:
            # The turn's lease ran out during the move: gates may have written the old
            # copy since the archive. Start again from a new archive; the old copy is intact.
            workflow.logger.warning("move of %s lost its turn; starting again", inp.principal)
            workflow.continue_as_new(c.MoveInput(principal=inp.principal, to_shard=inp.to_shard))
        await run_memory_activity(c.REMOVE_MEMORY, step, None, c.MOVE_OPTIONS, shard=from_shard)
        await self.turn.release(ask)
        return c.MoveReport(
            principal=inp.principal,
            from_shard=from_shard,
            to_shard=inp.to_shard,
            moved=True,
            outcomes=outcomes,
            archive_bytes=snap.size,
        )
