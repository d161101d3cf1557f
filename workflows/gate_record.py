"""The gate's turn and record: taking the principal's turn (and again, however long
the memory takes, for an answer that needs its N), recording the outcome until it
lands, giving the turn back, the status shown, the result, and telling the session.
A mixin of GateWorkflow (the turn's signals are TurnHolder's, workflows/turn.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    import vicar.workflows.gate_metrics as gate_metrics
    import vicar.workflows.search_attributes as sa
    from vicar.models import (
        Action,
        AnsweredBy,
        GateRequest,
        GateResult,
        GateStatus,
        OutcomeRecord,
        SessionGate,
        TurnRequest,
    )
    from vicar.workflows.failures import cause_message as _cause
    from vicar.workflows.turn import REPAIR_WAIT_CAP

from vicar.workflows.gate_state import GateState

# Recording an outcome retries until it lands: nothing the human said is lost. A few
# attempts here, then _record waits with a durable timer and tries again: a local
# activity retried for ever (a broken store) also kept the worker from shutting down.
RECORD: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=5
    ),
)


class GateRecord(GateState):
    # The consult the result was built from: what a gate nobody answered keeps for the audit trail.
    _audited_consult: c.ConsultResult | None = None

    async def _release(self, req: GateRequest) -> None:
        self._turn_owed = False
        await self.release_turn(c.TurnAsk(principal=req.principal, turn=self._turn(req)))

    async def _finish(self, req: GateRequest, result: GateResult) -> GateResult:
        """Tell the session the gate is done (its memory is ready for consolidation)."""
        gate_metrics.finished(req, result, self._escalated_at)
        if result.timed_out and workflow.patched(c.AUDIT_UNANSWERED):
            await self._record_unanswered(req, result)
        if self._in_session:
            try:
                await workflow.get_external_workflow_handle(
                    c.session_workflow_id(req.principal, req.session_id or "")
                ).signal(
                    c.GATE_DONE_SIGNAL,
                    SessionGate(
                        gate_id=req.gate_id,
                        workflow_id=workflow.info().workflow_id,
                        escalated=result.escalated,
                        answered_by=result.answered_by,
                        usage=result.usage,
                    ),
                )
            except Exception as exc:  # the session has ended: the gate's answer stands
                workflow.logger.warning("session %s did not take gate %s: %s", req.session_id, req.gate_id, exc)
        if self._turn_owed and self._wanted:
            # Asked after its record was in, the brain may not have seen the record: the
            # last thing before completing, so a request arriving during any earlier
            # await is not missed (one arriving with the completion makes the server
            # refuse it, and the workflow task runs again with the signal).
            await self._release(req)
        return result

    async def _take_turn(self, req: GateRequest, attempt: int = 0) -> tuple[int | None, str]:
        """(N, "") for a granted turn; (None, why) when the brain refused it because the
        principal's memory is unavailable."""
        try:
            ticket = await self._ask_turn(c.TurnAsk(principal=req.principal, turn=self._turn(req), attempt=attempt))
        except (ActivityError, ApplicationError) as exc:
            if not self._once:
                raise
            # The brain cannot run (request_turn says why, non-retryable): the human decides.
            return None, f"proxy unavailable: {_cause(exc)}"
        self._local_steps = ticket.local_steps
        self._max_dialog_turns = ticket.max_dialog_turns
        self._shard, self._shard_wait = ticket.shard, ticket.shard_wait_seconds
        self._default_deadline = ticket.deadline_seconds
        if ticket.error is not None:
            return None, ticket.error
        if ticket.n is not None:
            self._release_by_signal = ticket.release
            return ticket.n, ""
        grant = await self._granted()
        self._shard = grant.shard
        self._release_by_signal = grant.release
        return grant.n, grant.error or ""

    async def _turn_for_record(self, req: GateRequest) -> int:
        """Take the turn, however long the memory takes to be repaired."""
        wait, attempt = timedelta(seconds=1), 0
        while True:
            attempt += 1
            n, refused = await self._take_turn(req, attempt)
            if n is not None:
                return n
            assert self._details is not None
            self._details.calibration_note = f"answer kept; recording waits for the memory: {refused}"
            await workflow.sleep(wait)
            wait = min(wait * 2, REPAIR_WAIT_CAP)

    @staticmethod
    def _turn(req: GateRequest) -> TurnRequest:
        return TurnRequest(gate_id=req.gate_id, workflow_id=workflow.info().workflow_id)

    async def _record(
        self, req, n, action, text, answered_by, responder, consulted: c.ConsultResult, identity: str | None = None
    ) -> None:
        record = OutcomeRecord(
            request=req,
            n=n,
            workflow_id=workflow.info().workflow_id,
            action=action,
            response_text=text,
            answered_by=answered_by,
            responder=responder,
            responder_identity=identity,
            prior=consulted.prior,
            posterior=consulted.posterior,
            surprise=consulted.surprise,
            at=workflow.now(),
            dialog=list(self._dialog),
            calibration=consulted.calibration,
            started_at=workflow.info().start_time,
            escalated_at=self._details.escalated_at if self._details else None,
        )
        wait = timedelta(seconds=1)
        note = self._details.calibration_note if self._details else ""
        while True:  # until it lands (record_outcome is idempotent per gate)
            try:
                await self._step(c.RECORD_OUTCOME, record, result_type=str, options=RECORD)
                if self._details is not None:
                    self._details.calibration_note = note
                return
            except (ActivityError, ApplicationError) as exc:
                workflow.logger.warning("gate %s: recording waits for the memory: %s", req.gate_id, _cause(exc))
                if self._details is not None:
                    # Shown by the `details` query only (no command): the answer is in, its
                    # record is what waits, and why.
                    who = responder or ("the proxy" if answered_by is AnsweredBy.proxy else answered_by.value)
                    self._details.calibration_note = f"answered by {who}; recording waits: {_cause(exc)}"
            await workflow.sleep(wait)
            wait = min(wait * 2, REPAIR_WAIT_CAP)

    async def _record_cancelled(self, req: GateRequest) -> None:
        """A gate cancelled before anyone answered: kept in the audit trail like one whose
        deadline passed, with the proxy's guess if it had made one."""
        n = self._details.n if self._details is not None and self._details.n is not None else 0
        text = "Cancelled before anyone answered."
        await self._keep_unanswered(req, n, Action.hold, text, cancelled=True)

    async def _record_unanswered(self, req: GateRequest, result: GateResult) -> None:
        await self._keep_unanswered(req, result.n, result.action, result.text)

    async def _keep_unanswered(self, req: GateRequest, n: int, action, text: str, cancelled: bool = False) -> None:
        """Keep a gate nobody answered in the audit trail (apart from the outcomes, which
        teach the proxy). A few attempts: the gate's result stands without it."""
        consulted = self._audited_consult
        record = OutcomeRecord(
            request=req,
            n=n,
            workflow_id=workflow.info().workflow_id,
            action=action,
            response_text=text,
            cancelled=cancelled,
            answered_by=AnsweredBy.nobody,
            prior=consulted.prior if consulted else None,
            posterior=consulted.posterior if consulted else None,
            surprise=consulted.surprise if consulted else None,
            at=workflow.now(),
            dialog=list(self._dialog),
            calibration=consulted.calibration if consulted else None,
            started_at=workflow.info().start_time,
            escalated_at=self._details.escalated_at if self._details else None,
        )
        try:
            await self._step(c.RECORD_UNANSWERED, record, result_type=bool, options=RECORD)
        except (ActivityError, ApplicationError) as exc:
            workflow.logger.warning("gate %s: not kept in the audit trail: %s", req.gate_id, _cause(exc))

    def _set_status(self, status: GateStatus, confidence: float | None = None) -> None:
        assert self._details is not None
        self._details.status = status
        updates: list[SearchAttributeUpdate[Any]] = [sa.STATUS.value_set(status.value)]
        if confidence is not None:
            updates.append(sa.CONFIDENCE.value_set(confidence))
        workflow.upsert_search_attributes(updates)

    def _result(
        self, req, n, action, text, consulted: c.ConsultResult, *, escalated, answered_by, responder
    ) -> GateResult:
        self._audited_consult = consulted
        return GateResult(
            gate_id=req.gate_id,
            principal=req.principal,
            state=req.state,
            task_type=req.task_type,
            action=action,
            text=text,
            confidence=consulted.calibration.confidence,
            prior_confidence=consulted.prior.confidence,
            calibration_guard=consulted.calibration.guard,
            calibration_note=self._details.calibration_note if self._details else "",
            escalated=escalated,
            answered_by=answered_by,
            responder=responder,
            n=n,
            surprise=consulted.surprise,
            dialog=list(self._dialog),
            usage=self._usage,
            autonomy_threshold=consulted.calibration.threshold,
            autonomy_bound=consulted.calibration.bound,
            autonomy_evidence=consulted.calibration.evidence,
            model_version=self._pin.version if self._pin else None,
            prereview=list(consulted.posterior.prereview),
            unsupported=list(consulted.posterior.unsupported),
        )
