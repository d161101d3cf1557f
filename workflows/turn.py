"""The brain's turn, workflow side: how a gate, a consolidation or a move takes a
principal's turn and gives it back (TurnHolder), and the counter steps the brain runs to
hand out N. The brain that serves the turns is workflows/brain.py; the activities that
carry the asks are activities/turns.py.

The protocol. One brain workflow per principal owns the interaction counter and hands
the proxy's attention to one holder at a time, first come first served. A holder asks
with REQUEST_TURN: the activity sends the brain a `take_turn` update (update-with-start,
so the brain starts lazily) that grants an idle principal's turn at once and returns N;
otherwise the request is queued (`request_turn` signal) and the brain grants it later
with a `turn_granted` signal. The update never waits for the queue, so no long-running
handler holds up continue-as-new. Waiting for a human happens outside the turn.

Giving the turn back costs a gate that decided alone no round trip: its outcome record
is the release. The brain hands the turn on once the holder's record is in the store,
checked in the same activity that mirrors the next N (ADVANCE_TURN), so a principal's
next gate is granted in one update. A holder is told to release explicitly
(`turn_wanted`) only when another waits behind it before its record is in; if it has
already finished, that signal fails and the turn is free. Gates that escalate,
consolidations and moves give the turn back with RELEASE_TURN (`release_turn` signal).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import TurnGrant
    from vicar.models.control import Control
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.sealed import signal_arg

# Turn bookkeeping is a quick client call: a local activity, no extra workflow task.
QUICK: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=5)),
)
# Waiting for a broken memory to be repaired: first retry after 1 s, doubling up to this.
REPAIR_WAIT_CAP = timedelta(seconds=30)
# Reading and mirroring the counter: a few quick attempts for a busy file, then the turn
# is refused with the reason (a corrupt store fails at once: non-retryable). Unbounded
# retries held every gate of the principal `queued` for ever, and a local activity that
# never finishes also kept the worker from shutting down. The brain itself never fails:
# the next request reads the store again, so a repaired store is picked up.
COUNTER: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=4
    ),
)


class TurnHolder:
    """A workflow base for whatever holds a principal's turn: the brain's `turn_granted`
    and `turn_wanted` signals, one ask, the wait for a grant, the release, and (for work
    other than a gate, which must finish rather than escalate) the loop that waits as
    long as the memory stays unavailable."""

    def __init__(self) -> None:
        self._grant: TurnGrant | None = None  # holders before TURN_GRANT_FOR_ASK: the latest ask's grant
        self._grants: dict[int, TurnGrant] = {}  # by the ask each names (TURN_GRANT_FOR_ASK)
        self._asking: int | None = None  # the ask awaiting its grant (None: the holder predates it)
        self._wanted = False  # the brain asked for the turn back (turn_wanted), whatever the grant said
        self._control: Control | None = None  # the human's rules and pauses, as the turn was granted

    @workflow.signal(name=c.TURN_GRANTED_SIGNAL)
    def turn_granted(self, *args) -> None:
        grant = signal_arg(args, TurnGrant, c.TURN_GRANTED_SIGNAL)
        if grant is None:
            return
        if grant.ask is not None:
            self._grants.setdefault(grant.ask, grant)  # the brain re-sends grants: the first stands
        if self._grant is None:
            self._grant = grant
            self._control = grant.control

    @workflow.signal(name=c.TURN_WANTED_SIGNAL)
    def turn_wanted(self, *args) -> None:
        """The brain: another holder waits, give the turn back by signal after all (work
        other than a gate records no outcome: it always releases by signal)."""
        if signal_arg(args, str, c.TURN_WANTED_SIGNAL) is not None:
            self._wanted = True

    async def _ask_turn(self, turn: c.TurnAsk) -> c.TurnTicket:
        """One REQUEST_TURN; a grant that comes later by signal is awaited with _granted."""
        self._grant = None  # asked again after a refusal: wait for the new answer
        if workflow.patched(c.TURN_GRANT_FOR_ASK):
            # A grant for this ask may be here already (kept in _grants): the brain
            # granted it while the task that asked was lost with its worker, and the
            # ask's rerun is told "queued" again (the brain deduplicates the update).
            turn.turn.ask = self._asking = turn.attempt
        ticket = await workflow.execute_local_activity(c.REQUEST_TURN, turn, result_type=c.TurnTicket, **QUICK)
        if ticket.n is not None:
            self._control = ticket.control
        return ticket

    async def _granted(self) -> TurnGrant:
        ask = self._asking
        if ask is None:
            await workflow.wait_condition(lambda: self._grant is not None)
            assert self._grant is not None
            return self._grant
        # A grant naming no ask comes from a brain older than the asks (a worker of the
        # version before, mid-deployment): taken as that brain's protocol takes it.
        await workflow.wait_condition(
            lambda: ask in self._grants or (self._grant is not None and self._grant.ask is None)
        )
        grant = self._grants.get(ask) or self._grant
        assert grant is not None
        self._control = grant.control
        return grant

    async def take_turn(self, turn: c.TurnAsk, what: str) -> int | None:
        """The principal's shard once the turn is held (None unsharded)."""
        wait = timedelta(seconds=1)
        while True:
            ticket = await self._ask_turn(turn)
            turn.attempt += 1  # a new update id for the next ask (the brain deduplicates ids)
            refused, shard = ticket.error, ticket.shard
            if refused is None and ticket.n is None:
                grant = await self._granted()
                refused, shard = grant.error, grant.shard
            if refused is None:
                return shard
            # The brain refused the turn (the principal's memory is unavailable): wait
            # until it is repaired.
            workflow.logger.warning("%s waits for the memory: %s", what, refused)
            await workflow.sleep(wait)
            wait = min(wait * 2, REPAIR_WAIT_CAP)

    async def release_turn(self, turn: c.TurnAsk) -> None:
        await workflow.execute_local_activity(c.RELEASE_TURN, turn, **QUICK)


# -- the brain's counter steps (on the memory's shard) --------------------------------


async def read_counter(principal: str, shard: int | None, wait_seconds: float) -> int:
    # A regular activity, not a local one: its result is in history before any grant
    # mirrors a new N. A local read shares its workflow task with the first grants'
    # mirrors; when that task is lost (timed out under load), its retry re-read a store
    # the lost mirrors had already advanced, and N skipped values.
    return await run_memory_activity(
        c.READ_COUNTER, c.CounterInput(principal=principal), int, COUNTER, shard=shard, wait_seconds=wait_seconds
    )


async def mirror_counter(principal: str, n: int | None, shard: int | None, wait_seconds: float) -> int:
    """Brains started before TURN_BY_RECORD: the next N mirrored before it is granted."""
    return await run_memory_activity(
        c.MIRROR_COUNTER,
        c.CounterInput(principal=principal, n=n),
        int,
        COUNTER,
        shard=shard,
        wait_seconds=wait_seconds,
        local=True,
    )


async def advance_turn(
    principal: str, n: int | None, after: str | None, shard: int | None, wait_seconds: float
) -> c.TurnAdvanced:
    """Whether `after`'s record is in (the turn is free), mirroring N if given."""
    return await run_memory_activity(
        c.ADVANCE_TURN,
        c.TurnAdvance(principal=principal, n=n, after=after),
        c.TurnAdvanced,
        COUNTER,
        shard=shard,
        wait_seconds=wait_seconds,
        local=True,
    )
