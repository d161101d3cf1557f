"""The approval gate: the proxy predicts the human's answer and either gives it or
escalates to the human and waits for their answer (signal or update)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from vicar import contracts as c
    from vicar.models import (
        VALID_ACTIONS,
        Action,
        AnsweredBy,
        Calibration,
        GateDetails,
        GateRequest,
        GateResult,
        GateStatus,
        HumanAnswer,
        OutcomeRecord,
        PassResult,
        Surprise,
        TurnGrant,
        TurnRequest,
    )
    from vicar.proxy.decision import decide, surprised
    from workflows import search_attributes as sa

STEP = dict(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10)),
)
# Turn bookkeeping is a quick client call: a local activity, no extra workflow task.
QUICK = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=5)),
)


def check_answer(state_actions: tuple[Action, ...], answer: HumanAnswer) -> Action:
    valid = [a.value for a in state_actions]
    if answer.action not in valid:
        raise ValueError(f"unknown action {answer.action!r}; valid actions: {', '.join(valid)}")
    return Action(answer.action)


@workflow.defn(name=c.GATE_WORKFLOW)
class GateWorkflow:
    def __init__(self) -> None:
        self._grant: TurnGrant | None = None
        self._answer: HumanAnswer | None = None
        self._details: GateDetails | None = None
        self._local_steps = False

    async def _step(self, name: str, arg, result_type):
        """Run a proxy step. With a fast predictor (the offline one) steps run as local
        activities inside one workflow task: each regular activity costs a workflow
        task round trip (~35 ms on the dev server). Slow ones (LLM calls) run as
        regular activities with their own timeouts and retries."""
        if self._local_steps:
            return await workflow.execute_local_activity(name, arg, result_type=result_type, **STEP)
        return await workflow.execute_activity(name, arg, result_type=result_type, **STEP)

    # -- handlers --------------------------------------------------------------

    @workflow.signal
    def turn_granted(self, grant: TurnGrant) -> None:
        if self._grant is None:
            self._grant = grant

    @workflow.signal
    def human_response(self, answer: HumanAnswer) -> None:
        # A signal cannot be refused to its sender; a bad one is logged and dropped.
        # Callers that want an error use the `respond` update.
        try:
            self._validate(answer)
        except ValueError as exc:
            workflow.logger.warning("ignored human_response: %s", exc)
            return
        self._answer = answer

    @workflow.update
    def respond(self, answer: HumanAnswer) -> str:
        self._answer = answer
        return f"answer {answer.action} accepted for gate {self._details.gate_id if self._details else '?'}"

    @respond.validator
    def _validate(self, answer: HumanAnswer) -> None:
        d = self._details
        if d is None or d.status is not GateStatus.escalated:
            raise ValueError(
                f"gate is not waiting for a human answer (status: {d.status.value if d else 'starting'})"
            )
        if self._answer is not None:
            raise ValueError("gate already has a human answer")
        check_answer(VALID_ACTIONS[d.state], answer)

    @workflow.query
    def details(self) -> GateDetails | None:
        return self._details

    # -- run ---------------------------------------------------------------------

    @workflow.run
    async def run(self, req: GateRequest) -> GateResult:
        self._details = GateDetails(
            gate_id=req.gate_id, principal=req.principal, state=req.state, task_type=req.task_type,
            status=GateStatus.queued, question=req.question,
        )
        if workflow.info().typed_search_attributes.get(sa.PRINCIPAL) is None:
            # Started by a client that did not set them (vicar.gates.start_gate does):
            # every visibility write costs the server, so only when missing.
            workflow.upsert_search_attributes([
                sa.PRINCIPAL.value_set(req.principal), sa.STATE.value_set(req.state.value),
                sa.TASK_TYPE.value_set(req.task_type), sa.STATUS.value_set(GateStatus.queued.value),
            ])
        n = await self._take_turn(req)
        try:
            self._details.n = n
            self._details.status = GateStatus.consulting  # shown by the query, not indexed
            prior, posterior, surprise, calibration = await self._consult(req, n)
            decision = decide(req, calibration, posterior)
            self._details.proxy_action = posterior.action
            self._details.proxy_text = posterior.prose or posterior.note
            self._details.proxy_confidence = calibration.confidence
            if not decision.escalate:
                # Stored inside the turn, so the next gate of this principal sees it.
                await self._record(req, n, decision.action, decision.text, AnsweredBy.proxy, None,
                                   prior, posterior, surprise)
        finally:
            await workflow.execute_local_activity(
                c.RELEASE_TURN, c.TurnAsk(principal=req.principal, turn=self._turn(req)), **QUICK)

        if not decision.escalate:
            self._set_status(GateStatus.done)
            return self._result(req, n, decision.action, decision.text, calibration, prior, surprise,
                                escalated=False, answered_by=AnsweredBy.proxy, responder=None)

        # Escalate outside the turn: a slow human never blocks the principal's other gates.
        self._set_status(GateStatus.escalated, confidence=calibration.confidence)
        workflow.set_current_details(
            f"**Waiting for {req.principal}** — {req.state.value} / {req.task_type}\n\n"
            f"**Question:** {req.question}\n\n"
            f"**Proxy's guess** ({posterior.action.value if posterior.action else 'no prediction'}, "
            f"confidence {calibration.confidence:.2f}): {posterior.prose or posterior.note}\n\n"
            f"Answer with `vicar answer {req.gate_id} ACTION \"text\"`."
        )
        await workflow.wait_condition(lambda: self._answer is not None)
        answer = self._answer
        action = Action(answer.action)
        workflow.set_current_details("")
        await self._record(req, n, action, answer.text, AnsweredBy.human, answer.responder,
                           prior, posterior, surprise)
        self._set_status(GateStatus.done)
        return self._result(req, n, action, answer.text, calibration, prior, surprise,
                            escalated=True, answered_by=AnsweredBy.human, responder=answer.responder)

    async def _take_turn(self, req: GateRequest) -> int:
        ticket = await workflow.execute_local_activity(
            c.REQUEST_TURN, c.TurnAsk(principal=req.principal, turn=self._turn(req)),
            result_type=c.TurnTicket, **QUICK)
        self._local_steps = ticket.local_steps
        if ticket.n is not None:
            return ticket.n
        await workflow.wait_condition(lambda: self._grant is not None)
        assert self._grant is not None
        return self._grant.n

    @staticmethod
    def _turn(req: GateRequest) -> TurnRequest:
        return TurnRequest(gate_id=req.gate_id, workflow_id=workflow.info().workflow_id)

    async def _consult(
        self, req: GateRequest, n: int
    ) -> tuple[PassResult, PassResult, Surprise | None, Calibration]:
        bundle = await self._step(
            c.RETRIEVE, c.RetrieveInput(request=req, n=n), result_type=c.RetrievalBundle)
        prior = await self._step(
            c.PRIOR_PASS, c.PassInput(request=req, ctx=bundle.prior), result_type=PassResult)
        posterior = await self._step(
            c.POSTERIOR_PASS, c.PassInput(request=req, ctx=bundle.posterior, prior=prior),
            result_type=PassResult)
        surprise = None
        if surprised(prior, posterior):
            surprise = await self._step(
                c.EXTRACT_SURPRISE,
                c.SurpriseInput(request=req, ctx=bundle.posterior, prior=prior, posterior=posterior),
                result_type=Surprise)
        calibration = await self._step(
            c.CALIBRATE,
            c.CalibrateInput(principal=req.principal, confidence=posterior.confidence,
                             memory_depth=bundle.posterior.memory_depth),
            result_type=Calibration)
        if posterior.used_chunk_ids:
            # ACT-R rule 2: only the memories the proxy actually used get a trace.
            await self._step(
                c.REINFORCE, c.ReinforceInput(principal=req.principal, n=n, chunk_ids=posterior.used_chunk_ids),
                result_type=list[str])
        return prior, posterior, surprise, calibration

    async def _record(self, req, n, action, text, answered_by, responder, prior, posterior, surprise) -> None:
        await self._step(
            c.RECORD_OUTCOME,
            OutcomeRecord(request=req, n=n, workflow_id=workflow.info().workflow_id, action=action,
                          response_text=text, answered_by=answered_by, responder=responder,
                          prior=prior, posterior=posterior, surprise=surprise),
            result_type=str)

    def _set_status(self, status: GateStatus, confidence: float | None = None) -> None:
        assert self._details is not None
        self._details.status = status
        updates = [sa.STATUS.value_set(status.value)]
        if confidence is not None:
            updates.append(sa.CONFIDENCE.value_set(confidence))
        workflow.upsert_search_attributes(updates)

    def _result(self, req, n, action, text, calibration, prior, surprise, *, escalated, answered_by,
                responder) -> GateResult:
        return GateResult(
            gate_id=req.gate_id, principal=req.principal, state=req.state, task_type=req.task_type,
            action=action, text=text, confidence=calibration.confidence,
            prior_confidence=prior.confidence, calibration_guard=calibration.guard,
            escalated=escalated, answered_by=answered_by, responder=responder, n=n, surprise=surprise,
        )
