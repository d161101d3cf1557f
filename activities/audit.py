"""The audit trail's activities (docs/audit.md): where a principal's memory is, a page of
its gate records, and a review of an answer the proxy gave alone (a gate that ended
with no answer is recorded by the gate's own activities). Each is idempotent: reads
change nothing, and each write is keyed by the gate's workflow id."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.activities.answers import identity_refusal
from vicar.activities.routing import locate
from vicar.activities.store_errors import store_errors, unavailable
from vicar.errors import NO_MEMORY, VicarError
from vicar.memory.names import child_path
from vicar.memory.registry import MemoryRegistry
from vicar.models import OutcomeRecord
from vicar.models.audit import AuditPage, AuditPageRequest, MemoryPlace, Review, ReviewRequest, ReviewResult
from vicar.proxy.audit_trail import audit_page, is_unanswered
from vicar.proxy.reviews import record_review
from vicar.responders import load_policy
from vicar.settings import Settings

MEMORY_FILE = "memory.db"


class AuditActivities:
    def __init__(self, client: Client, registry: MemoryRegistry, settings: Settings) -> None:
        self.client = client
        self.registry = registry
        self.settings = settings

    def shared(self) -> list:
        return [self.locate_memory]

    def memory(self) -> list:
        return [self.audit_page, self.record_review]

    def _has_memory(self, principal: str) -> bool:
        # Read-only callers must not create a memory by opening one that is not there.
        return (child_path(self.settings.principals_dir, principal) / MEMORY_FILE).exists()

    @activity.defn(name=c.LOCATE_MEMORY)
    async def locate_memory(self, principal: str) -> MemoryPlace:
        return MemoryPlace(
            shard=await locate(self.client, self.settings, principal), wait_seconds=self.settings.shard_wait_seconds
        )

    @activity.defn(name=c.AUDIT_PAGE)
    @store_errors
    def audit_page(self, req: AuditPageRequest) -> AuditPage:
        if not self._has_memory(req.principal):
            raise ApplicationError(
                f"no memory for principal {req.principal!r} on this deployment", type=NO_MEMORY, non_retryable=True
            )
        return audit_page(self.registry.get(req.principal).store, req)

    @activity.defn(name=c.RECORD_REVIEW)
    async def record_review(self, req: ReviewRequest) -> ReviewResult:
        info = activity.info()
        identity = await self._started_by(info.workflow_id or "", info.workflow_run_id or "")
        try:
            return await asyncio.to_thread(self._review, req, identity)
        except ApplicationError:
            raise
        except Exception as exc:
            raise unavailable(exc) from exc

    async def _started_by(self, workflow_id: str, run_id: str) -> str | None:
        """The Temporal client identity on the review workflow's first event: who asked."""
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            return event.workflow_execution_started_event_attributes.identity or None
        return None

    def _review(self, req: ReviewRequest, identity: str | None) -> ReviewResult:
        gate = req.gate_workflow_id
        if not self._has_memory(req.principal):
            return ReviewResult(refusal="not_found", why=f"no memory for principal {req.principal!r}")
        store = self.registry.get(req.principal).store
        raw = store.outcome_record(gate)
        if raw is None:
            if is_unanswered(store, gate):
                return ReviewResult(
                    refusal="not_autonomous", why=f"gate {gate!r} was answered by nobody (its deadline passed)"
                )
            return ReviewResult(refusal="not_found", why=f"no answered gate {gate!r} in {req.principal}'s records")
        record = OutcomeRecord.model_validate_json(raw)
        post = record.posterior
        shown = ReviewResult(
            state=record.request.state.value,
            task_type=record.request.task_type,
            question=record.request.question,
            gate_id=record.request.gate_id,
            n=record.n,
            proxy_action=record.action.value,
            proxy_words=record.response_text,
        )
        if record.answered_by.value != "proxy":
            who = record.responder or record.answered_by.value
            return shown.model_copy(
                update=dict(
                    refusal="not_autonomous",
                    why=f"gate {gate!r} was answered by {who}, not by the proxy alone: only those are reviewed",
                )
            )
        try:
            # Closed: with no list, only the principal itself reviews (docs/identity.md).
            why = load_policy(self.settings.principals_dir, req.principal).closed_refusal(req.principal, req.reviewer)
        except VicarError as exc:
            why = f"nobody may review for {req.principal} until their allow-list is fixed: {exc}"
        if why is None and self.settings.require_identity_match:
            why = identity_refusal(req.reviewer, identity)
        if why is not None:  # the allow-list words its refusals for answers
            return shown.model_copy(update=dict(refusal="not_allowed", why=why.replace("answer", "review")))
        new, kept = record_review(
            store,
            Review(
                gate_workflow_id=gate,
                verdict=req.verdict,
                reviewer=req.reviewer,
                identity=identity,
                note=req.note,
                at=datetime.now(UTC),
            ),
            state=record.request.state.value,
            task_type=record.request.task_type,
            score=post.confidence if post else None,
        )
        if kept.verdict != req.verdict:
            return shown.model_copy(
                update=dict(
                    review=kept,
                    refusal="reviewed",
                    why=f"gate {gate!r} was reviewed {kept.verdict} by {kept.reviewer} at "
                    f"{kept.at.isoformat(timespec='seconds')}; a review stands once given",
                )
            )
        return shown.model_copy(update=dict(review=kept, new=new))
