"""Taking a principal's brain turn for work other than a gate (consolidation, a move),
waiting as long as the memory stays unavailable: such work must finish, not escalate."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import TurnGrant

# Turn bookkeeping is a quick client call: a local activity, no extra workflow task.
QUICK = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=5)),
)
# Waiting for a broken memory to be repaired: first retry after 1 s, doubling up to this.
REPAIR_WAIT_CAP = timedelta(seconds=30)


class TurnHolder:
    """A workflow base: the brain's `turn_granted` signal and the waiting loop."""

    def __init__(self) -> None:
        self._grant: TurnGrant | None = None

    @workflow.signal
    def turn_granted(self, grant: TurnGrant) -> None:
        if self._grant is None:
            self._grant = grant

    @workflow.signal
    def turn_wanted(self, gate_id: str) -> None:
        """Work other than a gate records no outcome: it always releases by signal."""

    async def take_turn(self, turn: c.TurnAsk, what: str) -> int | None:
        """The principal's shard once the turn is held (None unsharded)."""
        wait = timedelta(seconds=1)
        while True:
            self._grant = None
            ticket = await workflow.execute_local_activity(c.REQUEST_TURN, turn, result_type=c.TurnTicket, **QUICK)
            turn.attempt += 1  # a new update id for the next ask (the brain deduplicates ids)
            refused, shard = ticket.error, ticket.shard
            if refused is None and ticket.n is None:
                await workflow.wait_condition(lambda: self._grant is not None)
                assert self._grant is not None
                refused, shard = self._grant.error, self._grant.shard
            if refused is None:
                return shard
            # The brain refused the turn (the principal's memory is unavailable): wait
            # until it is repaired.
            workflow.logger.warning("%s waits for the memory: %s", what, refused)
            await workflow.sleep(wait)
            wait = min(wait * 2, REPAIR_WAIT_CAP)

    async def release_turn(self, turn: c.TurnAsk) -> None:
        await workflow.execute_local_activity(c.RELEASE_TURN, turn, **QUICK)
