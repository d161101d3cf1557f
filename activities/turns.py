"""The activity side of the brain's turn (workflows/turn.py has the workflow side and the
protocol): asking for a turn (an update with start, or a queued signal), giving it back,
and the counter the brain hands N from (read, and mirrored as it advances with the holder's record).

A mixin of ProxyActivities: it uses the worker's client, registry, settings, predictor
(whether steps run locally), brain config, task queue and served shards.
"""

from __future__ import annotations

import collections
from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from vicar import contracts as c
from vicar.activities.store_errors import store_errors
from vicar.errors import BRAIN_UNUSABLE
from vicar.memory.registry import MemoryRegistry
from vicar.models import BrainConfig, BrainInput, TurnReply
from vicar.proxy.provider import Predictor
from vicar.runtime.sharding import shard_of
from vicar.runtime.tasks import looked_at, wait_for
from vicar.settings import Settings

# Temporal admits at most 10 in-flight updates per workflow (history.maxInFlightUpdates)
# and answers RESOURCE_EXHAUSTED beyond, which the client then retries with backoff.
# Past this many take_turn updates in flight to one brain from this process, a gate
# queues by signal instead: it never needed the update's fast path while others wait.
# Only one process sends a principal's updates (see ProxyActivities.request_turn), so
# this bounds them all.
MAX_TURN_UPDATES_IN_FLIGHT = 4
# A take_turn update not answered in this long: the brain is looked at. One that cannot
# run (on a queue no worker polls, its task failing) is reported, and the gate escalates
# with proxy_error; a busy one gets the request by signal instead (it deduplicates).
TURN_UPDATE_WAIT_SECONDS = 10.0


class TurnActivities:
    # Set by ProxyActivities.__init__.
    client: Client
    registry: MemoryRegistry
    predictor: Predictor
    settings: Settings
    brain_config: BrainConfig
    task_queue: str
    _served: frozenset[int]
    _turn_updates: collections.Counter[str]  # take_turn updates in flight, per principal, this process

    @activity.defn(name=c.REQUEST_TURN)
    async def request_turn(self, ask: c.TurnAsk) -> c.TurnTicket:
        """Ask the principal's brain for a turn, starting the brain if needed. When
        few requests are in flight to that brain, the `take_turn` update (with start)
        grants an idle principal's turn at once; otherwise, or when the server is at
        its update limit, the request queues by signal-with-start and the brain grants
        it later with `turn_granted`. Both paths are idempotent: the update id derives
        from the gate (and the gate's attempt after a refused turn, whose refusal the
        brain run would otherwise replay), and the brain ignores a gate already queued
        or holding."""
        reply = TurnReply(n=None)
        if not self._sends_updates(ask.principal):
            await self._queue_turn(ask)
        elif self._turn_updates[ask.principal] < MAX_TURN_UPDATES_IN_FLIGHT:
            self._turn_updates[ask.principal] += 1
            try:
                reply = await wait_for(self._take_turn_update(ask), TURN_UPDATE_WAIT_SECONDS)
            except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
                # (the client turns the cancelled wait into its own error)
                if why := await self._brain_unusable(ask.principal):
                    raise ApplicationError(why, type=BRAIN_UNUSABLE, non_retryable=True) from None
                await self._queue_turn(ask)
            except RPCError as exc:
                if exc.status != RPCStatusCode.RESOURCE_EXHAUSTED:
                    raise
                await self._queue_turn(ask)  # another process filled the brain's update slots
            finally:
                self._turn_updates[ask.principal] -= 1
                if not self._turn_updates[ask.principal]:
                    del self._turn_updates[ask.principal]
        else:
            await self._queue_turn(ask)
        return c.TurnTicket(
            local_steps=self.predictor.local,
            n=reply.n,
            max_dialog_turns=self.settings.max_dialog_turns,
            error=reply.error,
            shard=reply.shard,
            shard_wait_seconds=self.settings.shard_wait_seconds,
            release=reply.release,
            deadline_seconds=self.settings.gate_deadline_seconds,
            control=reply.control,
        )

    async def _brain_unusable(self, principal: str) -> str | None:
        """Why the principal's brain cannot grant turns (None: it looks merely busy)."""
        wid = c.brain_workflow_id(principal)
        desc = await self.client.get_workflow_handle(wid).describe()
        if desc.task_queue != self.task_queue:
            return (
                f"brain unusable: {wid} runs on task queue {desc.task_queue!r}, which this deployment "
                f"does not serve ({self.task_queue!r}); terminate it and the next gate starts a good one"
            )
        pending = desc.raw_description.pending_workflow_task
        if desc.raw_description.HasField("pending_workflow_task") and pending.attempt > 2:
            return f"brain unusable: {wid}'s workflow task has failed {pending.attempt - 1} times"
        return None

    def _sends_updates(self, principal: str) -> bool:
        """Whether this process may use the update fast path for the principal: unsharded
        there is one worker; sharded, only the owner of the principal's home shard (the
        hash, whatever moves did to its memory), so however many workers share the queue
        one process's cap bounds the brain's in-flight updates."""
        count = self.settings.shard_count
        return count is None or shard_of(principal, count) in self._served

    def _brain_start(self, ask: c.TurnAsk) -> dict:
        return dict(
            args=[BrainInput(principal=ask.principal, config=ask.config or self.brain_config)],
            id=c.brain_workflow_id(ask.principal),
            task_queue=self.task_queue,
        )

    async def _take_turn_update(self, ask: c.TurnAsk) -> TurnReply:
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            c.BRAIN_WORKFLOW, **self._brain_start(ask), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING
        )
        looked_at(start.workflow_handle())  # a failed update fails the start's future too
        return await self.client.execute_update_with_start_workflow(
            c.TAKE_TURN_UPDATE,
            ask.turn,
            start_workflow_operation=start,
            id=f"turn/{ask.turn.workflow_id}" + (f"/{ask.attempt}" if ask.attempt else ""),
            result_type=TurnReply,
        )

    async def _queue_turn(self, ask: c.TurnAsk) -> None:
        await self.client.start_workflow(
            c.BRAIN_WORKFLOW, **self._brain_start(ask), start_signal=c.REQUEST_TURN_SIGNAL, start_signal_args=[ask.turn]
        )

    @activity.defn(name=c.RELEASE_TURN)
    async def release_turn(self, ask: c.TurnAsk) -> None:
        """Give the turn back. Idempotent: the brain ignores a release from a non-holder."""
        await self.client.get_workflow_handle(c.brain_workflow_id(ask.principal)).signal(
            c.RELEASE_TURN_SIGNAL, ask.turn.gate_id
        )

    @activity.defn(name=c.READ_COUNTER)
    @store_errors
    def read_counter(self, inp: c.CounterInput) -> int:
        return self.registry.get(inp.principal).counter()

    @activity.defn(name=c.ADVANCE_TURN)
    @store_errors
    def advance_turn(self, inp: c.TurnAdvance) -> c.TurnAdvanced:
        free, counter = self.registry.get(inp.principal).advance_counter(inp.n, inp.after)
        return c.TurnAdvanced(free=free, counter=counter)
