"""The session's activities: joining a session, and its working memory at the start.
Each is idempotent. (Its consolidation's are in activities/consolidation.py.)"""

from __future__ import annotations

import asyncio
import sqlite3

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from vicar import contracts as c
from vicar.activities.routing import locate
from vicar.activities.store_errors import unavailable
from vicar.memory.registry import MemoryRegistry
from vicar.memory.store import StoreError
from vicar.memory.working import load_working_memory
from vicar.models.brain import BrainStatus
from vicar.models.session import JoinReply, SessionInput, WorkingMemoryView
from vicar.settings import TASK_QUEUE, Settings


class SessionActivities:
    def __init__(
        self,
        client: Client,
        registry: MemoryRegistry,
        settings: Settings,
        task_queue: str = TASK_QUEUE,
    ) -> None:
        self.client = client
        self.registry = registry
        self.settings = settings
        self.task_queue = task_queue

    def all(self) -> list:
        return self.shared() + self.memory()

    def shared(self) -> list:
        return [self.join_session]

    def memory(self) -> list:
        return [self.load_working_memory]

    @activity.defn(name=c.JOIN_SESSION)
    async def join_session(self, inp: c.JoinInput) -> JoinReply:
        """Join the gate to its session, starting the session if it is the first gate
        (update-with-start; the update id derives from the gate, so a retry joins once)."""
        try:
            return await self._join(inp)
        except WorkflowUpdateFailedError as exc:
            # The session has ended: retrying cannot help; the gate goes on without it.
            raise ApplicationError(
                f"session {inp.session_id} refused the gate: {getattr(exc.cause, 'message', exc.cause)}",
                non_retryable=True,
            ) from None

    async def _join(self, inp: c.JoinInput) -> JoinReply:
        shard = await locate(self.client, self.settings, inp.principal)
        return await self.client.execute_update_with_start_workflow(
            c.JOIN_UPDATE,
            inp.join,
            start_workflow_operation=WithStartWorkflowOperation(
                c.SESSION_WORKFLOW,
                SessionInput(
                    principal=inp.principal,
                    session_id=inp.session_id,
                    config=self.settings.session,
                    shard=shard,
                    shard_wait_seconds=self.settings.shard_wait_seconds,
                ),
                id=c.session_workflow_id(inp.principal, inp.session_id),
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
            id=f"join/{inp.join.workflow_id}",
            result_type=JoinReply,
        )

    @activity.defn(name=c.LOAD_WORKING_MEMORY)
    async def load_working_memory(self, inp: c.WorkingMemoryInput) -> WorkingMemoryView:
        """N from the principal's brain (the store's mirror when no brain runs yet), then
        activation over every chunk, top-down into the token budget."""
        try:
            memory = await asyncio.to_thread(self.registry.get, inp.principal)
            n = await asyncio.to_thread(memory.counter)
        except Exception as exc:
            if isinstance(exc, (StoreError, sqlite3.Error)):
                raise unavailable(exc) from exc
            raise
        try:
            status = await self.client.get_workflow_handle(c.brain_workflow_id(inp.principal)).query(
                c.BRAIN_STATUS_QUERY, result_type=BrainStatus
            )
            n = max(n, status.counter)
        except RPCError:
            pass  # no brain yet: nothing has been granted beyond the mirror
        wm = await asyncio.to_thread(load_working_memory, memory, n, inp.token_budget)
        return WorkingMemoryView(**wm.model_dump())
