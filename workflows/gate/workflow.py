"""The approval gate: the proxy predicts the human's answer and either gives it or
escalates to the human and waits for their answer (signal or update).

Read top to bottom: the handlers (what a client may send and ask), then `run`, the
gate's whole course. Its steps are plain functions over one state object
(workflows/gate/steps.py, workflows/gate/state.py); the principal's turn is a Turn
object (workflows/turn.py), which the consolidation and the move hold too."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    import vicar.workflows.gate.state as state
    import vicar.workflows.gate.steps as steps
    import vicar.workflows.metrics as metrics
    import vicar.workflows.search_attributes as sa
    from vicar.errors import ANSWER_REFUSED, INVALID_GATE_REQUEST, RefusedWrite
    from vicar.models import (
        Action,
        AnsweredBy,
        CfAState,
        DialogTurn,
        GateDetails,
        GateRequest,
        GateResult,
        GateStatus,
        HumanAnswer,
    )
    from vicar.models.view import ArtifactFile
    from vicar.workflows.failures import cause_message, is_cancel
    from vicar.workflows.gate.state import GateState
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.sealed import one_arg

# Answers signalled before the gate escalates are kept (in order) up to this many; more
# are logged and ignored: a flood must not grow the workflow's state.
MAX_EARLY_ANSWERS = 20


def answer_arg(args: tuple) -> HumanAnswer:
    """An answer's payload, opened and decoded here so a bad one is refused with what is
    wrong (an oversized text names its limit, a foreign key names the key) rather than
    "Failed decoding arguments" or a failed workflow task (workflows/sealed.py)."""
    return one_arg(args, HumanAnswer, "answer")


@workflow.defn(name=c.GATE_WORKFLOW)
class GateWorkflow:
    @workflow.init
    @raw_argument
    def __init__(self, *args: RawValue) -> None:
        # The request is validated here rather than by the payload converter: one that is
        # not one GateRequest (a typo'd field from a client in another language, no input,
        # two) fails the workflow in its first task (run raises it), non-retryable, where a
        # failed conversion would fail its workflow task again and again with nothing shown
        # as failed. Meanwhile handlers see a gate that never leaves `queued`.
        self._bad: ApplicationError | None = None
        try:
            req = one_input(args, GateRequest, "gate request", error_type=INVALID_GATE_REQUEST)
        except ApplicationError as exc:
            self._bad = exc
            req = GateRequest.model_construct(
                principal="", gate_id="", state=CfAState.PLAN_ASSERT, task_type="", question=""
            )
        self.s = GateState.start(req, workflow.info().workflow_id)

    # -- handlers --------------------------------------------------------------

    @workflow.signal(name=c.HUMAN_RESPONSE_SIGNAL)
    @raw_argument
    def human_response(self, *args: RawValue) -> None:
        # A signal cannot be refused to its sender; a bad one is logged and ignored.
        # Callers that want an error use the `respond` update. Every answer is judged by
        # the main loop, in the order they came, when the gate waits for one: it can read
        # the allow-list and the caller's identity then.
        s = self.s
        s.signals += 1
        try:
            answer = answer_arg(args)
        except RefusedWrite as exc:
            workflow.logger.warning("ignored human_response: %s", exc)
            return
        if len(s.early) >= MAX_EARLY_ANSWERS:
            workflow.logger.warning(
                "ignored human_response from %s: %d answers already wait to be judged",
                answer.responder,
                MAX_EARLY_ANSWERS,
            )
            return
        s.early.append((answer, s.signals))

    @workflow.update(name=c.RESPOND_UPDATE)
    @raw_argument
    async def respond(self, *args: RawValue) -> str:
        s = self.s
        answer = answer_arg(args)  # the validator refused a bad one
        # The allow-list as it is now, and who the caller is, from history.
        info = workflow.current_update_info()  # always set in an update handler
        verdict = await steps.vet(s, answer, update_id=info.id if info else None)
        if not verdict.allowed:
            raise ApplicationError(verdict.why, type=ANSWER_REFUSED, non_retryable=True)
        try:
            # The gate may have moved on while the answer was judged; two answers that
            # arrive in one workflow task both pass the validator: the first one wins.
            state.check(s, answer)
        except ValueError as exc:
            raise ApplicationError(str(exc), type=ANSWER_REFUSED, non_retryable=True) from None
        s.answer, s.identity = answer, verdict.identity
        return f"answer {answer.action} accepted for gate {s.req.gate_id}"

    @respond.validator
    @raw_argument
    def _validate(self, *args: RawValue) -> None:
        state.check(self.s, answer_arg(args))

    @workflow.signal(name=c.TURN_GRANTED_SIGNAL)
    @raw_argument
    def turn_granted(self, *args: RawValue) -> None:
        self.s.turn.granted(args)

    @workflow.signal(name=c.TURN_WANTED_SIGNAL)
    @raw_argument
    def turn_wanted(self, *args: RawValue) -> None:
        self.s.turn.want(args)

    @workflow.query(name=c.DETAILS_QUERY)
    def details(self) -> GateDetails | None:
        return None if self._bad else self.s.details

    @workflow.query(name=c.ARTIFACT_QUERY)
    def artifact(self) -> list[ArtifactFile]:
        return self.s.artifact_files

    # -- run ---------------------------------------------------------------------

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> GateResult:
        if self._bad is not None:
            raise self._bad
        s = self.s
        try:
            return await self._run(s)
        except BaseException as exc:
            # Cancelled before anyone answered (arriving as the cancel itself, or as an
            # activity cancelled with the gate): what the list and `VicarStatus` filters
            # show, and a record in the audit trail (the cancellation is taken: these
            # steps still run).
            if not is_cancel(exc):
                raise
            steps.set_status(s, GateStatus.cancelled)
            n = s.details.n if s.details.n is not None else 0
            await steps.keep_unanswered(s, n, Action.hold, "Cancelled before anyone answered.", cancelled=True)
            raise

    async def _run(self, s: GateState) -> GateResult:
        req = s.req
        metrics.started(req)
        if workflow.info().typed_search_attributes.get(sa.PRINCIPAL) is None:
            # Started by a client that did not set them (vicar.client.gates.start_gate does):
            # every visibility write costs the server, so only when missing.
            workflow.upsert_search_attributes(
                [
                    sa.PRINCIPAL.value_set(req.principal),
                    sa.STATE.value_set(req.state.value),
                    sa.TASK_TYPE.value_set(req.task_type),
                    sa.STATUS.value_set(GateStatus.queued.value),
                ]
            )
        if req.session_id:
            await steps.join_session(s)

        n, refused = await steps.take_turn(s)
        s.details.n = n
        if n is not None:
            # Under the turn, so no other run of this id records meanwhile.
            try:
                earlier = await steps.recorded_outcome(s)
            except (ActivityError, ApplicationError) as exc:
                if is_cancel(exc):
                    raise
                earlier, n, refused = None, None, cause_message(exc)  # the human decides; the record waits
            if earlier is not None:
                await steps.release(s)
                steps.ignore_early(s, "this gate id's outcome is already recorded")
                steps.set_status(s, GateStatus.done)
                return state.result_from_record(req, earlier)

        recorded = False
        try:
            # A refused turn (the principal's memory is unavailable): no consult, the human decides.
            if n is not None:
                consulted, decision = await steps.consult_and_decide(s, n)
            else:
                consulted, decision = steps.cannot_consult(s, refused)
            if not decision.escalate:
                assert n is not None  # only a consult decides, and it ran under the turn
                # Stored inside the turn, so the next gate of this principal sees it.
                action, text = state.final(s, decision.action, decision.text)
                await steps.record(s, n, action, text, *state.answerer(s), consulted)
                recorded = True
        finally:
            if recorded and not (s.release_by_signal or s.turn.wanted):
                s.turn_owed = True  # the record gave the turn back, unless the brain asks for it
            else:
                await steps.release(s)

        if news := consulted.calibration.withdrawn_news:
            # The first gate to see its context's autonomy withdrawn tells the orchestrator.
            withdrawn = c.AutonomyWithdrawn(state=req.state.value, task_type=req.task_type, reason=news)
            await steps.notify(s, "autonomy_withdrawn", withdrawn)
        if not decision.escalate:
            assert n is not None
            steps.set_status(s, GateStatus.done)
            steps.ignore_early(s, "the proxy answered the gate")
            by, responder = state.answerer(s)  # the proxy, or the human's rule and its author
            result = state.result(s, n, action, text, consulted, escalated=False, answered_by=by, responder=responder)
            return await steps.finish(s, result)

        # Escalate outside the turn: a slow human never blocks the principal's other gates.
        posterior, calibration = consulted.posterior, consulted.calibration
        s.consulted = consulted  # what a gate cancelled while it waits keeps
        steps.set_status(s, GateStatus.escalated, confidence=calibration.confidence)
        metrics.escalated(req)
        s.details.escalated_at = workflow.now()
        if deadline := req.deadline_seconds or s.default_deadline:
            s.deadline_at = workflow.info().start_time + timedelta(seconds=deadline)
        s.details.deadline = s.deadline_at
        await steps.read_excerpts(s)
        steps.publish_escalation(s)
        workflow.set_current_details(state.ui_details(s, posterior, calibration))
        await steps.notify(s, "escalated")
        answer = await self._human_decision()
        if answer is None:
            return await self._time_out(n, consulted)
        workflow.set_current_details("")
        steps.ignore_early(s, "the gate has its answer")
        action, text = state.final(s, Action(answer.action), answer.text)
        if n is None:
            # The answer needs an N to be stored: take the turn again, waiting until the
            # memory is repaired. The answer is kept in the workflow meanwhile.
            steps.set_status(s, GateStatus.queued)
            n = s.details.n = await steps.turn_for_record(s)
            try:
                await steps.record(s, n, action, text, AnsweredBy.human, answer.responder, consulted)
            finally:
                await steps.release(s)
        else:
            await steps.record(s, n, action, text, AnsweredBy.human, answer.responder, consulted)
        steps.set_status(s, GateStatus.done)
        result = state.result(
            s, n, action, text, consulted, escalated=True, answered_by=AnsweredBy.human, responder=answer.responder
        )
        return await steps.finish(s, result.model_copy(update={"responder_identity": s.identity}))

    async def _human_decision(self) -> HumanAnswer | None:
        """The human's decision (None: the deadline came first); dialog questions on the
        way are put to the agent side and shown."""
        s = self.s
        while True:
            answer = await self._human_answer()
            if answer is None or answer.action != Action.dialog.value:
                return answer  # kept in s.answer: later answers are refused while it is recorded
            s.answer = None
            # The human asked something: the agent side answers, the human decides after.
            try:
                await steps.converse(s, answer.text, AnsweredBy.human, answer.responder)
            except (ActivityError, ApplicationError) as exc:
                if is_cancel(exc):
                    raise
                s.dialog.append(DialogTurn(speaker="agent", text=f"(no answer: {cause_message(exc)})"))
                s.details.dialog = list(s.dialog)
            steps.publish_escalation(s)  # who asked what, for `vicar escalations`

    async def _human_answer(self) -> HumanAnswer | None:
        """The next accepted answer (left in s.answer), or None once the deadline passed.
        Answers signalled before escalation come first, in the order they came, each
        judged now."""
        s = self.s
        while True:
            while s.answer is None and s.early:
                answer, ordinal = s.early.pop(0)
                await steps.take_signalled(s, answer, ordinal)
            if s.answer is not None:
                return s.answer
            timeout = None
            if s.deadline_at is not None:
                timeout = (s.deadline_at - workflow.now()).total_seconds()
                if timeout <= 0:
                    return None
            try:
                await workflow.wait_condition(lambda: s.answer is not None or bool(s.early), timeout=timeout)
            except TimeoutError:
                pass  # the deadline: seen on the next round

    async def _time_out(self, n: int | None, consulted: c.ConsultResult) -> GateResult:
        """Nobody answered in time: the gate ends with the proxy's guess, recorded nowhere
        (no human said anything to learn from)."""
        s = self.s
        workflow.set_current_details("")
        steps.ignore_early(s, "the gate's deadline passed")
        steps.set_status(s, GateStatus.timed_out)
        await steps.notify(s, "timed_out")
        guess = consulted.posterior
        text = (
            f"No answer by the deadline ({s.deadline_at.isoformat() if s.deadline_at else '?'}). "
            f"The proxy's guess: {guess.action.value if guess.action else 'none'}"
            + (f": {guess.prose or guess.note}" if (guess.prose or guess.note) else "")
        )
        result = state.result(
            s,
            n if n is not None else 0,
            Action.hold,
            text,
            consulted,
            escalated=True,
            answered_by=AnsweredBy.nobody,
            responder=None,
        )
        return await steps.finish(s, result.model_copy(update={"timed_out": True, "proxy_action": guess.action}))
