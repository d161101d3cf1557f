"""Moving a principal's memory to another shard, under the principal's brain turn (no
gate reads or writes it meanwhile): archive on the old shard, pieces to the new one,
install there (verified: size, sha256, SQLite integrity, outcome count), then the
brain's shard changes, and only then is the old copy removed. Every step waits for its
shard's owner however long, and is idempotent, so a move interrupted by a crash goes on
where it stopped."""

from __future__ import annotations

from datetime import timedelta

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.errors import INVALID_MOVE_INPUT, validation_summary
    from vicar.memory.errors import InvalidInput
    from vicar.memory.names import check_name, check_principal
    from vicar.memory.transfer import Snapshot
    from vicar.models import TurnRequest
    from vicar.runtime.sharding import MAX_SHARDS
    from vicar.workflows.routing import run_memory_activity

from vicar.workflows.inputs import raw_input
from vicar.workflows.sealed import Refused, sealed_writes, value_of
from vicar.workflows.turn import QUICK, TurnHolder

_UNTIL_DONE = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1))
FOREVER = dict(start_to_close_timeout=timedelta(minutes=10), retry_policy=_UNTIL_DONE)
# A piece is 256 KB: an attempt lost with its worker is tried again after this long.
PIECE = dict(start_to_close_timeout=timedelta(seconds=20), retry_policy=_UNTIL_DONE)
# Pieces per run: each passes through history twice (about 0.7 MB per piece, base64).
PIECES_PER_RUN = 16


def _input(args: tuple) -> c.MoveInput:
    """The input, checked before any step: its principal and move id become paths on the
    shards' disks, and a move started by hand must not reach outside the data directory
    (the activities check again). A bad one fails the workflow at once, non-retryable,
    in one line, where a failed conversion would fail its task again and again."""
    try:
        if len(args) != 1:  # *args: no input or two must fail here too, not in the SDK's conversion
            raise InvalidInput(f"expected one MoveInput argument, got {len(args)}")
        inp = (
            value_of(args[0], c.MoveInput, sealed=sealed_writes())
            if isinstance(args[0], RawValue)
            else c.MoveInput.model_validate(args[0])
        )
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
        return inp
    except ValidationError as exc:
        why = validation_summary(exc)
    except (InvalidInput, Refused) as exc:
        why = str(exc)
    except Exception as exc:  # not JSON, or not an object
        why = f"{type(exc).__name__}: {exc}"
    why = " ".join(why.split())
    raise ApplicationError(f"invalid move input: {why[:2000]}", type=INVALID_MOVE_INPUT, non_retryable=True)


@raw_input
@workflow.defn(name=c.MOVE_WORKFLOW)
class MoveWorkflow(TurnHolder):
    @workflow.run
    async def run(self, *args) -> c.MoveReport:
        inp = _input(args)
        move_id = inp.move_id or str(workflow.uuid4())
        turn = c.TurnAsk(
            principal=inp.principal,
            turn=TurnRequest(gate_id=f"move/{move_id}", workflow_id=workflow.info().workflow_id),
        )
        shard = await self.take_turn(
            turn, f"move of {inp.principal}"
        )  # the holder asking again (a new run) keeps its turn
        from_shard = inp.from_shard if inp.from_shard is not None else shard
        if from_shard == inp.to_shard or shard is None:
            await self.release_turn(turn)
            return c.MoveReport(principal=inp.principal, from_shard=shard, to_shard=inp.to_shard, moved=False)
        step = c.MoveStep(principal=inp.principal, move_id=move_id)
        snap = inp.snapshot or await run_memory_activity(c.EXPORT_MEMORY, step, Snapshot, FOREVER, shard=from_shard)
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
                PIECE,
                shard=from_shard,
            )
            await run_memory_activity(c.IMPORT_PIECE, piece, int, PIECE, shard=inp.to_shard)
        outcomes = await run_memory_activity(
            c.INSTALL_MEMORY,
            c.MoveInstall(principal=inp.principal, move_id=move_id, snapshot=snap),
            int,
            FOREVER,
            shard=inp.to_shard,
        )
        changed = await workflow.execute_local_activity(
            c.SET_SHARD,
            c.ShardChange(principal=inp.principal, turn=turn.turn, shard=inp.to_shard),
            result_type=bool,
            **QUICK,
        )
        if not changed:
            # The turn's lease ran out during the move: gates may have written the old
            # copy since the archive. Start again from a new archive; the old copy is intact.
            workflow.logger.warning("move of %s lost its turn; starting again", inp.principal)
            workflow.continue_as_new(c.MoveInput(principal=inp.principal, to_shard=inp.to_shard))
        await run_memory_activity(c.REMOVE_MEMORY, step, None, FOREVER, shard=from_shard)
        await self.release_turn(turn)
        return c.MoveReport(
            principal=inp.principal,
            from_shard=from_shard,
            to_shard=inp.to_shard,
            moved=True,
            outcomes=outcomes,
            archive_bytes=snap.size,
        )
