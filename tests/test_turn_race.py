"""The turn's grant names the ask it answers.

Seen in a soak run: a worker died after a gate's first workflow task had asked for the
turn (queued) and the brain had granted it by signal, but before the task completed. The
retried task delivers the grant first and runs the ask again; the brain's update
deduplicates to the same "queued". A holder that forgot every grant when it asked waited
for ever. Here the grant is delivered before the ask (signal-with-start) and the ask
answers "queued", which is the retried task's shape, without killing a worker."""

from __future__ import annotations

import asyncio
import uuid

from temporalio import activity, workflow
from temporalio.common import RawValue
from temporalio.worker import Worker

from vicar import contracts as c
from vicar.models.brain import TurnGrant, TurnRequest
from vicar.workflows.inputs import raw_argument
from vicar.workflows.turn import Turn

# What the stand-in brain answers, per ask: "queued" or a refusal.
REFUSE_FIRST = "refuse-first"


@activity.defn(name=c.REQUEST_TURN)
async def queued_or_refused(ask: c.TurnAsk) -> c.TurnTicket:
    if ask.principal == REFUSE_FIRST and ask.attempt == 0:
        return c.TurnTicket(local_steps=True, error="memory unavailable: being repaired")
    return c.TurnTicket(local_steps=True, n=None)


@workflow.defn(sandboxed=False)
class TurnProbe:
    """A holder of the turn as the gate, a consolidation and a move hold it."""

    def __init__(self) -> None:
        self.turn = Turn()

    @workflow.signal(name=c.TURN_GRANTED_SIGNAL)
    @raw_argument
    def turn_granted(self, *args: RawValue) -> None:
        self.turn.granted(args)

    @workflow.run
    async def run(self, principal: str) -> int | None:
        turn = c.TurnRequest(gate_id="probe", workflow_id=workflow.info().workflow_id)
        return await self.turn.take(c.TurnAsk(principal=principal, turn=turn), "probe")


async def _probe(temporal_env, principal: str, early: TurnGrant, late: TurnGrant | None = None):
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    client = temporal_env.client
    async with Worker(client, task_queue=queue, workflows=[TurnProbe], activities=[queued_or_refused]):
        handle = await client.start_workflow(
            TurnProbe.run,
            principal,
            id=f"probe-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            start_signal=c.TURN_GRANTED_SIGNAL,
            start_signal_args=[early],
        )
        if late is not None:
            await asyncio.sleep(2.5)  # past the refusal's 1 s wait: the second ask is queued
            await handle.signal(c.TURN_GRANTED_SIGNAL, late)
        try:
            return await asyncio.wait_for(handle.result(), 15)
        finally:
            await handle.terminate() if not (await handle.describe()).close_time else None


async def test_a_grant_delivered_before_its_ask_is_not_forgotten(temporal_env):
    grant = TurnGrant(gate_id="probe", n=7, shard=3, ask=0)
    assert await _probe(temporal_env, "p", grant) == 3


async def test_a_grant_for_an_earlier_ask_does_not_answer_a_later_one(temporal_env):
    """Ask 0 is refused (a broken memory); a grant that names ask 0 must not pass for ask
    1's, which comes later with another shard."""
    stale = TurnGrant(gate_id="probe", n=7, shard=3, ask=0)
    fresh = TurnGrant(gate_id="probe", n=8, shard=5, ask=1)
    assert await _probe(temporal_env, REFUSE_FIRST, stale, fresh) == 5


def test_the_request_carries_the_ask():
    assert TurnRequest(gate_id="g", workflow_id="w", ask=2).ask == 2
