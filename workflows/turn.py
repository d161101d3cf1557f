"""The brain's turn, workflow side: how a gate, a consolidation or a move takes a
principal's turn and gives it back (Turn, an object each of them holds), and the counter
steps the brain runs to hand out N. The brain that serves the turns is workflows/brain.py;
the activities that carry the asks are activities/turns.py.

The protocol. One brain workflow per principal owns the interaction counter and hands
the proxy's attention to one holder at a time, first come first served. A holder asks
with REQUEST_TURN: the activity sends the brain a `take_turn` update (update-with-start,
so the brain starts lazily) that grants an idle principal's turn at once and returns N;
otherwise the request is queued (`request_turn` signal) and the brain grants it later
with a `turn_granted` signal naming the ask it answers. The update never waits for the
queue, so no long-running handler holds up continue-as-new. Waiting for a human happens
outside the turn.

Giving the turn back costs a gate that decided alone no round trip: its outcome record
is the release. The brain hands the turn on once the holder's record is in the store,
checked in the same activity that mirrors the next N (ADVANCE_TURN), so a principal's
next gate is granted in one update. A holder is told to release explicitly
(`turn_wanted`) only when another waits behind it before its record is in; if it has
already finished, that signal fails and the turn is free. Gates that escalate,
consolidations and moves give the turn back with RELEASE_TURN (`release_turn` signal).

A holder declares the two signal handlers (Temporal finds handlers on the workflow
class) and hands their argument to its Turn.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import TurnGrant
    from vicar.models.control import Control
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.sealed import signal_arg

# Waiting for a broken memory to be repaired: first retry after 1 s, doubling up to this.
REPAIR_WAIT_CAP = timedelta(seconds=30)


class Turn:
    """A holder's side of the principal's turn: the grants the brain sent (by the ask
    each answers), whether the brain wants the turn back, the human's rules and pauses
    as the turn was granted; one ask, the wait for its grant, the release, and (for work
    other than a gate, which must finish rather than escalate) the loop that waits as
    long as the memory stays unavailable."""

    def __init__(self) -> None:
        # A grant can come before the ask it answers is done: the brain granted it while
        # the task that asked was lost with its worker, and the ask's rerun is told
        # "queued" again (the brain deduplicates the update). So each is kept.
        self.grants: dict[int, TurnGrant] = {}
        self.asking = 0  # the ask whose grant `grant` waits for
        self.wanted = False  # the brain asked for the turn back (turn_wanted), whatever the grant said
        self.control: Control | None = None  # the human's rules and pauses, as the turn was granted

    def granted(self, args: tuple) -> None:
        """The `turn_granted` signal."""
        grant = signal_arg(args, TurnGrant, c.TURN_GRANTED_SIGNAL)
        if grant is None:
            return
        if grant.ask is None:
            workflow.logger.warning("ignored %s: it names no ask", c.TURN_GRANTED_SIGNAL)
            return
        self.grants.setdefault(grant.ask, grant)  # the brain re-sends grants: the first stands

    def want(self, args: tuple) -> None:
        """The `turn_wanted` signal: another holder waits, give the turn back by signal
        after all (work other than a gate records no outcome: it always releases by signal)."""
        if signal_arg(args, str, c.TURN_WANTED_SIGNAL) is not None:
            self.wanted = True

    async def request(self, ask: c.TurnAsk) -> c.TurnTicket:
        """One REQUEST_TURN, naming its attempt; a grant that comes later by signal is
        awaited with `grant`."""
        ask.turn.ask = self.asking = ask.attempt
        ticket = await workflow.execute_local_activity(c.REQUEST_TURN, ask, result_type=c.TurnTicket, **c.QUICK_OPTIONS)
        if ticket.n is not None:
            self.control = ticket.control
        return ticket

    async def grant(self) -> TurnGrant:
        """The brain's grant for the last ask."""
        ask = self.asking
        await workflow.wait_condition(lambda: ask in self.grants)
        grant = self.grants[ask]
        self.control = grant.control
        return grant

    async def take(self, ask: c.TurnAsk, what: str) -> int | None:
        """The turn, however long the memory stays unavailable; the principal's shard once
        it is held (None unsharded)."""
        wait = timedelta(seconds=1)
        while True:
            ticket = await self.request(ask)
            ask.attempt += 1  # a new update id for the next ask (the brain deduplicates ids)
            refused, shard = ticket.error, ticket.shard
            if refused is None and ticket.n is None:
                grant = await self.grant()
                refused, shard = grant.error, grant.shard
            if refused is None:
                return shard
            # The brain refused the turn (the principal's memory is unavailable): wait
            # until it is repaired.
            workflow.logger.warning("%s waits for the memory: %s", what, refused)
            await workflow.sleep(wait)
            wait = min(wait * 2, REPAIR_WAIT_CAP)

    async def release(self, ask: c.TurnAsk) -> None:
        await workflow.execute_local_activity(c.RELEASE_TURN, ask, **c.QUICK_OPTIONS)


# -- the brain's counter steps (on the memory's shard) --------------------------------


async def read_counter(principal: str, shard: int | None, wait_seconds: float) -> int:
    # A regular activity, not a local one: its result is in history before any grant
    # mirrors a new N. A local read shares its workflow task with the first grants'
    # mirrors; when that task is lost (timed out under load), its retry re-read a store
    # the lost mirrors had already advanced, and N skipped values.
    return await run_memory_activity(
        c.READ_COUNTER,
        c.CounterInput(principal=principal),
        int,
        c.COUNTER_OPTIONS,
        shard=shard,
        wait_seconds=wait_seconds,
    )


async def advance_turn(
    principal: str, n: int | None, after: str | None, shard: int | None, wait_seconds: float
) -> c.TurnAdvanced:
    """Whether `after`'s record is in (the turn is free), mirroring N if given."""
    return await run_memory_activity(
        c.ADVANCE_TURN,
        c.TurnAdvance(principal=principal, n=n, after=after),
        c.TurnAdvanced,
        c.COUNTER_OPTIONS,
        shard=shard,
        wait_seconds=wait_seconds,
        local=True,
    )
