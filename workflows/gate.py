"""The approval gate: the proxy predicts the human's answer and either gives it or
escalates to the human and waits for their answer (signal or update)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    import vicar.workflows.gate_metrics as gate_metrics
    import vicar.workflows.search_attributes as sa
    from vicar.errors import ANSWER_REFUSED, INVALID_GATE_REQUEST
    from vicar.models import (
        Action,
        AnsweredBy,
        DialogTurn,
        GateDetails,
        GateRequest,
        GateResult,
        GateStatus,
        HumanAnswer,
        JoinReply,
        ModelPin,
        SessionJoin,
        Usage,
    )
    from vicar.workflows.failures import cause_message as _cause
    from vicar.workflows.gate_once import recorded as recorded_outcome
    from vicar.workflows.gate_once import result_from_record
    from vicar.workflows.inputs import one_input, raw_input
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.sealed import sealed_writes
    from vicar.workflows.turn import QUICK

from vicar.workflows.gate_answers import AnswerJudge
from vicar.workflows.gate_answers import answer_arg as _answer_arg
from vicar.workflows.gate_consult import STEP, GateConsult
from vicar.workflows.gate_record import GateRecord
from vicar.workflows.gate_shown import initial_details, read_excerpts, shown, ui_details
from vicar.workflows.gate_withdrawal import announce_withdrawal
from vicar.workflows.turn import TurnHolder

# Telling the webhook: a receiver that is down gets a few minutes of retries, then the
# gate goes on without it (the escalation is in visibility and the UI regardless).
NOTIFY: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=8
    ),
)
# Answers signalled before the gate escalates are kept (in order) up to this many; more
# are logged and ignored: a flood must not grow the workflow's state.
MAX_EARLY_ANSWERS = 20
# While the principal's allow-list cannot be read every answer is refused; it is read
# again this often, so a fixed file lets the gate be answered.
ALLOW_LIST_REREAD = timedelta(minutes=1)
# ... but at once when its shard had no owner: that read already waited the shard's
# bounded time, so the loop is not hot, and an answer is taken as soon as the owner is back.
ALLOW_LIST_REREAD_SHARD = timedelta(seconds=1)


def _request(args: tuple) -> GateRequest:
    """The gate's input, validated here rather than by the payload converter: a request
    that is not one GateRequest (a typo'd field from a client in another language, no
    input, two) fails the workflow at once, non-retryable, where a failed conversion
    would fail its workflow task again and again with nothing shown as failed."""
    return one_input(args, GateRequest, "gate request", error_type=INVALID_GATE_REQUEST)


class _DeadlinePassed(Exception):
    """The gate's deadline passed while it waited for the human."""


def check_answer(state_actions: tuple[Action, ...], answer: HumanAnswer) -> Action:
    valid = [a.value for a in state_actions]
    if answer.action not in valid:
        raise ValueError(f"unknown action {answer.action!r}; valid actions: {', '.join(valid)}")
    return Action(answer.action)


@raw_input
@workflow.defn(name=c.GATE_WORKFLOW)
class GateWorkflow(GateConsult, GateRecord, AnswerJudge, TurnHolder):
    def __init__(self) -> None:
        super().__init__()  # the turn (TurnHolder)
        self._answer: HumanAnswer | None = None
        self._details: GateDetails | None = None
        self._local_steps = False
        self._max_dialog_turns = 5
        self._dialog: list[DialogTurn] = []
        self._usage = Usage()
        self._valid_actions: tuple[Action, ...] = ()
        self._working_memory = ""
        self._in_session = False
        # human_response signals not yet judged, with their place among this run's signals
        # (which event in history carries the caller's identity)
        self._early: list[tuple[HumanAnswer, int]] = []
        self._signals = 0
        self._vetting = False  # VET_ANSWERS: answers judged when they come (allow-list, identity)
        self._once = False  # GATE_ONCE: an id whose outcome is recorded returns it
        self._identity: str | None = None  # the accepted answer's caller identity
        self._allowed: list[str] = []  # who may answer ([]: anyone), read when the gate escalates
        self._allowed_error = ""  # the allow-list could not be read: nobody may answer
        self._reread_allowed = ALLOW_LIST_REREAD
        self._pin: ModelPin | None = None  # the learned model this gate decides with
        self._shard: int | None = None  # where the principal's memory lives (None: unsharded)
        self._shard_wait = 60.0  # seconds a memory step waits for the shard's owner
        self._escalated_at = None  # for the escalation age metric
        self._release_by_signal = True  # False: the outcome record gives the turn back (workflows/brain.py)
        self._turn_owed = False  # holding the turn until the record lands or a release is asked for
        self._default_deadline = 0.0  # the worker's VICAR_GATE_DEADLINE_SECONDS (from the ticket)
        self._deadline_at = None  # when the gate stops waiting for the human (None: never)
        self._artifact_files: list = []  # the worker's excerpts of the artifact files (ARTIFACT_QUERY)

    async def _step(self, name: str, arg, result_type, options: dict = STEP, local: bool | None = None):
        """Run a proxy step where the principal's memory is. Unsharded, with a fast
        predictor (the offline one), steps run as local activities inside one workflow
        task: each regular activity costs a workflow task round trip (~35 ms on the dev
        server). Slow ones (LLM calls) run as regular activities with their own timeouts
        and retries. Sharded, every step runs on the shard's queue."""
        return await run_memory_activity(
            name,
            arg,
            result_type,
            options,
            shard=self._shard,
            wait_seconds=self._shard_wait,
            local=self._local_steps if local is None else local,
        )

    # -- handlers --------------------------------------------------------------

    @workflow.signal(name=c.HUMAN_RESPONSE_SIGNAL)
    def human_response(self, *args) -> None:
        # A signal cannot be refused to its sender; a bad one is logged and ignored.
        # Callers that want an error use the `respond` update. One that comes before
        # the gate escalates is kept and judged when it does; with VET_ANSWERS every one
        # is judged by the main loop, which can read the allow-list and the identity.
        self._signals += 1
        try:
            answer = _answer_arg(args, sealed=sealed_writes())
        except ValueError as exc:
            workflow.logger.warning("ignored human_response: %s", exc)
            return
        d = self._details
        # Behind answers still kept, so they are judged in the order they came.
        if self._vetting or d is None or d.status in (GateStatus.queued, GateStatus.consulting) or self._early:
            if len(self._early) >= MAX_EARLY_ANSWERS:
                workflow.logger.warning(
                    "ignored human_response from %s: %d answers already wait to be judged",
                    answer.responder,
                    MAX_EARLY_ANSWERS,
                )
            else:
                self._early.append((answer, self._signals))
            return
        self._take(answer)

    def _take(self, answer: HumanAnswer) -> None:
        try:
            self._check(answer)
        except ValueError as exc:
            workflow.logger.warning("ignored human_response from %s: %s", answer.responder, exc)
            return
        self._answer = answer

    @workflow.update(name=c.RESPOND_UPDATE)
    async def respond(self, *args) -> str:
        answer = _answer_arg(args, sealed=False)  # the validator refused a plain one
        identity = None
        if self._vetting:
            # The allow-list as it is now, and who the caller is, from history.
            info = workflow.current_update_info()  # always set in an update handler
            verdict = await self._vet(answer, update_id=info.id if info else None)
            if not verdict.allowed:
                raise ApplicationError(verdict.why, type=ANSWER_REFUSED, non_retryable=True)
            try:
                self._check(answer)  # the gate may have moved on while the answer was checked
            except ValueError as exc:
                raise ApplicationError(str(exc), type=ANSWER_REFUSED, non_retryable=True) from None
            identity = verdict.identity
        if self._answer is not None:
            # Two answers that arrive in one workflow task both pass the validator before
            # either handler runs: the first one handled wins, the other is refused here.
            raise ApplicationError("gate already has a human answer", non_retryable=True)
        self._answer, self._identity = answer, identity
        return f"answer {answer.action} accepted for gate {self._details.gate_id if self._details else '?'}"

    @respond.validator
    def _validate(self, *args) -> None:
        self._check(_answer_arg(args, sealed=True))

    def _check(self, answer: HumanAnswer) -> None:
        d = self._details
        if d is None or d.status is not GateStatus.escalated:
            raise ValueError(f"gate is not waiting for a human answer (status: {d.status.value if d else 'starting'})")
        if self._answer is not None:
            raise ValueError("gate already has a human answer")
        check_answer(self._valid_actions, answer)
        if answer.action == Action.dialog.value:
            if not answer.text.strip():
                raise ValueError("a dialog answer needs text: the question or point for the agent")
            asked = sum(1 for t in self._dialog if t.speaker == "reviewer" and t.answered_by is AnsweredBy.human)
            if asked >= self._max_dialog_turns:
                raise ValueError(
                    f"dialog limit ({self._max_dialog_turns} turns) reached: "
                    f"answer with approve, correct, reject, hold or withdraw"
                )
        if not answer.responder:
            raise ValueError("an answer needs a responder: who is answering (vicar answer --responder NAME)")
        if self._vetting:
            return  # the allow-list is read when the answer comes (_vet)
        if self._allowed_error:
            raise ValueError(
                f"nobody may answer for {d.principal} until their allow-list is fixed: {self._allowed_error}"
            )
        if self._allowed and answer.responder not in self._allowed:
            raise ValueError(
                f"{answer.responder!r} may not answer for {d.principal}; allowed: {', '.join(self._allowed)}"
            )

    @workflow.query(name=c.DETAILS_QUERY)
    def details(self) -> GateDetails | None:
        return self._details

    @workflow.query(name=c.ARTIFACT_QUERY)
    def artifact(self) -> list:
        return self._artifact_files

    # -- run ---------------------------------------------------------------------

    @workflow.run
    async def run(self, *args) -> GateResult:
        req = _request(args)
        try:
            return await self._run(req)
        except asyncio.CancelledError:
            if self._details is not None and workflow.patched(c.GATE_DEADLINE):
                self._set_status(GateStatus.cancelled)  # what the list and `VicarStatus` filters show
            if self._details is not None and workflow.patched(c.AUDIT_CANCELLED):
                await self._record_cancelled(req)  # the cancellation is taken: this step still runs
            raise

    async def _run(self, req: GateRequest) -> GateResult:
        self._vetting = workflow.patched(c.VET_ANSWERS)
        self._once = workflow.patched(c.GATE_ONCE)
        self._valid_actions = req.valid_actions
        self._details = initial_details(req, workflow.info().workflow_id)
        gate_metrics.started(req)
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
            # The session's working memory is the cacheable prefix of this gate's prompts.
            try:
                joined = await workflow.execute_local_activity(
                    c.JOIN_SESSION,
                    c.JoinInput(
                        principal=req.principal,
                        session_id=req.session_id,
                        join=SessionJoin(gate_id=req.gate_id, workflow_id=workflow.info().workflow_id),
                    ),
                    result_type=JoinReply,
                    **QUICK,
                )
                self._working_memory = joined.working_memory
                self._in_session = True
            except (ActivityError, ApplicationError) as exc:
                # An ended session: the gate still runs, without its working memory.
                workflow.logger.warning("gate %s runs outside session %s: %s", req.gate_id, req.session_id, _cause(exc))
        n, refused = await self._take_turn(req)
        self._details.n = n
        if n is not None and self._once:
            # Under the turn, so no other run of this id records meanwhile.
            try:
                earlier = await recorded_outcome(req, self._shard, self._shard_wait)
            except (ActivityError, ApplicationError) as exc:
                earlier, n, refused = None, None, _cause(exc)  # the human decides; the record waits
            if earlier is not None:
                await self._release(req)
                self._ignore_early("this gate id's outcome is already recorded")
                self._set_status(GateStatus.done)
                return result_from_record(req, earlier)
        recorded = False
        try:
            # A refused turn (the principal's memory is unavailable): no consult, the human decides.
            consulted, decision = await self._proxy_dialog(req, n) if n is not None else self._unavailable(refused)
            if not decision.escalate:
                # Stored inside the turn, so the next gate of this principal sees it.
                action, text = self._final(decision.action, decision.text)
                await self._record(req, n, action, text, *self._answerer(), consulted)
                recorded = True
        finally:
            if recorded and not (self._release_by_signal or self._wanted) and workflow.patched(c.TURN_BY_RECORD):
                self._turn_owed = True  # the record gave the turn back, unless the brain asks for it
            else:
                await self._release(req)

        if consulted.calibration.withdrawn_news and workflow.patched(c.WITHDRAWAL_NOTICE):
            await announce_withdrawal(req, self._shown(), consulted.calibration.withdrawn_news, NOTIFY)
        if not decision.escalate:
            self._set_status(GateStatus.done)
            self._ignore_early("the proxy answered the gate")
            by, responder = self._answerer()  # the proxy, or the human's rule and its author
            return await self._finish(
                req, self._result(req, n, action, text, consulted, escalated=False, answered_by=by, responder=responder)
            )

        # Escalate outside the turn: a slow human never blocks the principal's other gates.
        posterior, calibration = consulted.posterior, consulted.calibration
        self._audited_consult = consulted  # what a gate cancelled while it waits keeps
        if not self._vetting:
            await self._read_allowed(req)
        self._set_status(GateStatus.escalated, confidence=calibration.confidence)
        self._escalated_at = gate_metrics.escalated(req)
        self._details.escalated_at = workflow.now()
        deadline = req.deadline_seconds or self._default_deadline
        if deadline and workflow.patched(c.GATE_DEADLINE):
            self._deadline_at = workflow.info().start_time + timedelta(seconds=deadline)
        self._details.deadline = self._deadline_at
        self._artifact_files = await read_excerpts(req, self._details)
        self._publish_escalation()
        workflow.set_current_details(ui_details(req, self._details, posterior, calibration))
        await self._notify(req, "escalated")
        try:
            answer = await self._human_decision(req)
        except _DeadlinePassed:
            return await self._time_out(req, n, consulted)
        workflow.set_current_details("")
        self._ignore_early("the gate has its answer")
        action, text = self._final(Action(answer.action), answer.text)
        if n is None:
            # The answer needs an N to be stored: take the turn again, waiting until the
            # memory is repaired. The answer is kept in the workflow meanwhile.
            self._set_status(GateStatus.queued)
            n = await self._turn_for_record(req)
            self._details.n = n
            try:
                await self._record(req, n, action, text, AnsweredBy.human, answer.responder, consulted, self._identity)
            finally:
                await self._release(req)
        else:
            await self._record(req, n, action, text, AnsweredBy.human, answer.responder, consulted, self._identity)
        self._set_status(GateStatus.done)
        result = self._result(
            req, n, action, text, consulted, escalated=True, answered_by=AnsweredBy.human, responder=answer.responder
        )
        return await self._finish(req, result.model_copy(update={"responder_identity": self._identity}))

    async def _human_decision(self, req: GateRequest) -> HumanAnswer:
        """The human's decision; dialog questions on the way are put to the agent side
        and shown. Raises _DeadlinePassed if the deadline comes first."""
        while True:
            answer = await self._human_answer(req)
            if answer.action != Action.dialog.value:
                return answer  # kept in self._answer: later answers are refused while it is recorded
            self._answer = None
            # The human asked something: the agent side answers, the human decides after.
            try:
                await self._converse(req, answer.text, AnsweredBy.human, answer.responder)
            except (ActivityError, ApplicationError) as exc:
                self._dialog.append(DialogTurn(speaker="agent", text=f"(no answer: {_cause(exc)})"))
                if self._details is not None:  # set since the gate started
                    self._details.dialog = list(self._dialog)
            self._publish_escalation()  # who asked what, for `vicar escalations`
            if not self._vetting:
                await self._read_allowed(req)  # the principal may have changed it meanwhile

    async def _time_out(self, req: GateRequest, n: int | None, consulted: c.ConsultResult) -> GateResult:
        """Nobody answered in time: the gate ends with the proxy's guess, recorded nowhere
        (no human said anything to learn from)."""
        workflow.set_current_details("")
        self._ignore_early("the gate's deadline passed")
        self._set_status(GateStatus.timed_out)
        await self._notify(req, "timed_out")
        guess = consulted.posterior
        text = (
            f"No answer by the deadline ({self._deadline_at.isoformat() if self._deadline_at else '?'}). "
            f"The proxy's guess: {guess.action.value if guess.action else 'none'}"
            + (f": {guess.prose or guess.note}" if (guess.prose or guess.note) else "")
        )
        result = self._result(
            req,
            n if n is not None else 0,
            Action.hold,
            text,
            consulted,
            escalated=True,
            answered_by=AnsweredBy.nobody,
            responder=None,
        )
        return await self._finish(req, result.model_copy(update={"timed_out": True, "proxy_action": guess.action}))

    async def _notify(self, req: GateRequest, event: str) -> None:
        """Tell the webhook (if the worker has one); a receiver that stays down is logged."""
        if not workflow.patched(c.GATE_DEADLINE):
            return
        assert self._details is not None
        notice = c.Notice(
            event=event,
            event_id=f"{workflow.info().workflow_id}/{event}",
            gate=self._shown(),
            deadline=self._deadline_at,
        )
        try:
            await workflow.execute_activity(c.NOTIFY, notice, result_type=bool, **NOTIFY)
        except ActivityError as exc:
            workflow.logger.warning("gate %s: the webhook was not told (%s): %s", req.gate_id, event, _cause(exc))

    async def _human_answer(self, req: GateRequest) -> HumanAnswer:
        """The next accepted answer (left in self._answer); answers signalled before
        escalation come first, in the order they came, each judged now by the validator."""
        while True:
            while self._answer is None and self._early:
                answer, ordinal = self._early.pop(0)
                if self._vetting:
                    await self._take_vetted(answer, ordinal)
                else:
                    self._take(answer)
            if self._answer is not None:
                return self._answer
            timeouts = [self._reread_allowed.total_seconds()] if self._allowed_error else []
            if self._deadline_at is not None:
                left = (self._deadline_at - workflow.now()).total_seconds()
                if left <= 0:
                    raise _DeadlinePassed
                timeouts.append(left)
            try:
                await workflow.wait_condition(
                    lambda: self._answer is not None or bool(self._early), timeout=min(timeouts) if timeouts else None
                )
            except TimeoutError:
                if self._allowed_error:
                    await self._read_allowed(req)

    async def _read_allowed(self, req: GateRequest) -> None:
        """Who may answer for the principal, through an activity (recorded in history)."""
        try:
            self._allowed = await self._step(c.ALLOWED_RESPONDERS, req.principal, list[str], QUICK, local=True)
            self._allowed_error = ""
        except (ActivityError, ApplicationError) as exc:
            # Fail closed: a list that cannot be read must not let everyone answer.
            self._allowed_error = _cause(exc)
            unowned = isinstance(exc, ApplicationError) and exc.type == c.STORE_UNAVAILABLE and self._shard is not None
            self._reread_allowed = ALLOW_LIST_REREAD_SHARD if unowned else ALLOW_LIST_REREAD
            workflow.logger.warning("gate %s refuses every answer: %s", req.gate_id, self._allowed_error)

    def _publish_escalation(self) -> None:
        """What `vicar escalations` shows, in the memo: visibility carries it, so the list
        needs no worker. Clipped: a memo rides in every listing."""
        if workflow.patched(c.ESCALATION_MEMO):
            workflow.upsert_memo({c.ESCALATION_MEMO: self._shown().model_dump(mode="json")})

    def _shown(self) -> GateDetails:
        """The gate's details with each text clipped, for the memo and the webhook."""
        assert self._details is not None
        return shown(self._details)

    def _ignore_early(self, why: str) -> None:
        for answer, _ in self._early:
            workflow.logger.warning("ignored human_response from %s: %s", answer.responder, why)
        self._early.clear()
