"""The gate's steps: plain functions over its state (workflows/gate/state.py), each
waiting on Temporal (an activity, a timer, a signal), in the order workflow.py runs
them: joining the session; the principal's turn (taken, taken again for an answer that
needs its N, given back); the consult under it (the human's rules and pauses first,
then the proxy's passes and its dialog with the agent side); the record; for an
escalated gate the excerpts, the webhook and each answer's vet; and the finish."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    import vicar.workflows.metrics as metrics
    import vicar.workflows.search_attributes as sa
    from vicar.models import (
        Action,
        AnsweredBy,
        Calibration,
        DialogTurn,
        GateResult,
        GateStatus,
        HumanAnswer,
        JoinReply,
        ModelPin,
        OutcomeRecord,
        PassResult,
        SessionGate,
        SessionJoin,
        Surprise,
    )
    from vicar.models.control import Control, Verdict
    from vicar.models.view import ArtifactFile, ExcerptInput, excerpt_line
    from vicar.proxy.decision import Decision, decide, surprised
    from vicar.workflows.failures import cause_message, is_cancel
    from vicar.workflows.gate.state import GateState, check, forced, overruled, show, shown, unavailable
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.turn import REPAIR_WAIT_CAP

Failed = (ActivityError, ApplicationError)  # how an activity's failure reaches workflow code


async def memory_step(
    s: GateState,
    name: str,
    arg: Any,
    result_type: Any,
    options: dict[str, Any] = c.STEP_OPTIONS,
    local: bool | None = None,
) -> Any:
    """Run a proxy step where the principal's memory is. Unsharded, with a fast predictor
    (the learned or offline one), steps run as local activities inside one workflow task:
    each regular activity costs a workflow task round trip (~35 ms on the dev server).
    Slow ones (LLM calls) run as regular activities with their own timeouts and retries.
    Sharded, every step runs on the shard's queue."""
    return await run_memory_activity(
        name,
        arg,
        result_type,
        options,
        shard=s.shard,
        wait_seconds=s.shard_wait,
        local=s.local_steps if local is None else local,
    )


async def join_session(s: GateState) -> None:
    """The session's working memory is the cacheable prefix of this gate's prompts."""
    req = s.req
    join = SessionJoin(gate_id=req.gate_id, workflow_id=s.details.workflow_id)
    inp = c.JoinInput(principal=req.principal, session_id=req.session_id or "", join=join)
    try:
        joined = await workflow.execute_local_activity(c.JOIN_SESSION, inp, result_type=JoinReply, **c.QUICK_OPTIONS)
    except Failed as exc:
        # An ended session: the gate still runs, without its working memory.
        workflow.logger.warning("gate %s runs outside session %s: %s", req.gate_id, req.session_id, cause_message(exc))
        return
    s.working_memory, s.in_session = joined.working_memory, True


# -- the turn ---------------------------------------------------------------------


async def take_turn(s: GateState, attempt: int = 0) -> tuple[int | None, str]:
    """(N, "") for a granted turn; (None, why) when the brain refused it because the
    principal's memory is unavailable, or cannot run (the human decides then)."""
    try:
        ticket = await s.turn.request(s.turn_ask(attempt))
    except Failed as exc:
        return None, f"proxy unavailable: {cause_message(exc)}"  # request_turn says why, non-retryable
    s.local_steps, s.max_dialog_turns = ticket.local_steps, ticket.max_dialog_turns
    s.shard, s.shard_wait = ticket.shard, ticket.shard_wait_seconds
    s.default_deadline = ticket.deadline_seconds
    if ticket.error is not None:
        return None, ticket.error
    if ticket.n is not None:
        s.release_by_signal = ticket.release
        return ticket.n, ""
    grant = await s.turn.grant()
    s.shard, s.release_by_signal = grant.shard, grant.release
    return grant.n, grant.error or ""


async def turn_for_record(s: GateState) -> int:
    """Take the turn, however long the memory takes to be repaired."""
    wait, attempt = timedelta(seconds=1), 0
    while True:
        attempt += 1
        n, refused = await take_turn(s, attempt)
        if n is not None:
            return n
        s.details.calibration_note = f"answer kept; recording waits for the memory: {refused}"
        await workflow.sleep(wait)
        wait = min(wait * 2, REPAIR_WAIT_CAP)


async def release(s: GateState) -> None:
    s.turn_owed = False
    await s.turn.release(s.turn_ask())


async def recorded_outcome(s: GateState) -> OutcomeRecord | None:
    """The outcome a run under this gate's id already recorded (a gate id is used once
    per principal), read under the turn so no other run of the id records meanwhile.
    With local steps one local activity also pins the consult's model (a dispatch less);
    if it fails (the pin may be what did), the lookup alone decides, the consult pins."""
    lookup = c.OutcomeLookup(principal=s.req.principal, workflow_id=s.details.workflow_id)
    if s.local_steps and workflow.patched(c.LOOKUP_PIN_PATCH):
        try:
            found = await memory_step(s, c.LOOK_UP_AND_PIN, lookup, c.LookupAndPin, c.LOOKUP_PIN_OPTIONS, local=True)
        except Failed as exc:
            if is_cancel(exc):
                raise
            workflow.logger.warning("gate %s: lookup with pin failed: %s", s.req.gate_id, cause_message(exc))
        else:
            s.pin, s.pinned = found.pin, found.pinned
            return found.outcome
    return await memory_step(s, c.RECORDED_OUTCOME, lookup, OutcomeRecord | None, c.LOOKUP_OPTIONS, local=True)


# -- the consult, under the turn ----------------------------------------------------


async def consult_and_decide(s: GateState, n: int) -> tuple[c.ConsultResult, Decision]:
    """The human's rules and pauses first; then consult, and while the proxy's reply is
    a dialog line, let the agent side answer and consult again. Bounded: at the bound,
    or when either side has nothing to say, the human decides. Dialog never ends in an
    automatic approval by itself."""
    ruled = await obey(s)
    if ruled is not None:
        return ruled
    try:
        if s.local_steps and not s.pinned:
            # Under the turn, once per gate: its every consult (dialog, retries) uses this version.
            s.pin = await memory_step(s, c.PIN_MODEL, s.req.principal, Optional[ModelPin], c.PIN_OPTIONS, local=True)
        while True:
            s.details.status = GateStatus.consulting  # shown by the query, not indexed
            consulted = overruled(s, await consult(s, n))
            decision = decide(s.req, consulted.calibration, consulted.posterior, overruled=forced(s))
            show(s, consulted)
            if decision.escalate or decision.action is not Action.dialog:
                return consulted, decision
            proxy_turns = sum(1 for t in s.dialog if t.speaker == "reviewer")
            if proxy_turns >= s.max_dialog_turns:
                s.details.calibration_note = f"dialog bound: {proxy_turns} reviewer turns without a decision"
                return consulted, Decision(escalate=True, action=None, text=decision.text)
            if not await converse(s, decision.text, AnsweredBy.proxy):
                return consulted, Decision(escalate=True, action=None, text=decision.text)
    except Failed as exc:
        # The proxy could not run (provider down, bad key, broken memory): the human
        # decides, and the reason is on the gate for the operator.
        consulted, decision = cannot_consult(s, f"proxy unavailable: {cause_message(exc)}")
        if forced(s):
            consulted = overruled(s, consulted)
            show(s, consulted)
        return consulted, decision


def cannot_consult(s: GateState, reason: str) -> tuple[c.ConsultResult, Decision]:
    consulted = unavailable(reason)
    show(s, consulted)
    return consulted, Decision(escalate=True, action=None, text="")


async def obey(s: GateState) -> tuple[c.ConsultResult, Decision] | None:
    """The human's rules and pauses (vicar/models/control.py), handed over with the turn:
    a pause or an `ask` rule makes the gate ask the human whatever its escalation mode,
    the reason shown where escalation reasons are; an `approve`/`reject` rule answers for
    the human, recorded as answered by the rule and its author (never the proxy's
    evidence). The verdict is kept (state.forced, overruled, answerer); the rule's
    answer is returned when an answer rule decides, else None."""
    s.verdict = None
    control, req = s.turn.control, s.req
    if workflow.patched(c.DEFAULT_RULES_PATCH):
        # Vicar's default rules ask about what cannot be undone at every gate, for a
        # principal with no rules of their own too (the brain hands out none then).
        control = control or Control()
        rules = control.in_force()
    elif control is None or control.empty():
        return None
    else:
        rules = control.rules
    pause = control.pause_for(req.state, req.task_type)
    if pause is not None:
        s.verdict = Verdict(escalate=True, reason=pause.reason(), guard="paused")
        return None
    if not rules:
        return None
    try:
        matching = c.RulesInput(request=req, control=control)
        s.verdict = await memory_step(s, c.MATCH_RULES, matching, Optional[Verdict], c.MATCH_OPTIONS)
    except Failed as exc:
        # A rule is never skipped because it could not be checked: the human decides.
        reason = f"the rules could not be checked: {cause_message(exc)}"
        s.verdict = Verdict(escalate=True, reason=reason, guard="rule")
    v = s.verdict
    if v is None or v.escalate or v.rule is None:
        return None
    rule = v.rule
    action = Action(rule.effect.value)
    none = PassResult(prose="", note=v.reason, confidence=0.0)
    calibration = Calibration(
        confidence=0.0, guard=v.guard, note=v.reason, fired=[v.guard], rule=rule.name, rule_author=rule.author
    )
    consulted = c.ConsultResult(prior=none, posterior=none, calibration=calibration)
    show(s, consulted)
    text = rule.text or f"{action.value.capitalize()}d by {rule.author or 'the principal'}'s rule {rule.name}."
    return consulted, Decision(escalate=False, action=action, text=text)


async def consult(s: GateState, n: int) -> c.ConsultResult:
    req, now, gate_key, dialog = s.req, workflow.now(), s.details.workflow_id, list(s.dialog)
    if s.local_steps:
        inp = c.ConsultInput(
            request=req, n=n, now=now, gate_key=gate_key, dialog=dialog, working_memory=s.working_memory, model=s.pin
        )
        consulted = await memory_step(s, c.CONSULT, inp, c.ConsultResult, c.CONSULT_OPTIONS)
    else:
        consulted = await consult_in_steps(s, n, now, gate_key, dialog)
    surprise_usage = consulted.surprise.usage if consulted.surprise else None
    s.usage = s.usage + consulted.prior.usage + consulted.posterior.usage + surprise_usage
    return consulted


async def consult_in_steps(s: GateState, n: int, now, gate_key: str, dialog: list[DialogTurn]) -> c.ConsultResult:
    """The same path as the CONSULT activity, one activity per step: each LLM call
    gets its own timeout and retries, and a retry never repeats a finished call."""
    req = s.req
    bundle = await memory_step(
        s, c.RETRIEVE, c.RetrieveInput(request=req, n=n, working_memory=s.working_memory), c.RetrievalBundle
    )
    prior = await memory_step(s, c.PRIOR_PASS, c.PassInput(request=req, ctx=bundle.prior, dialog=dialog), PassResult)
    posterior = await memory_step(
        s, c.POSTERIOR_PASS, c.PassInput(request=req, ctx=bundle.posterior, prior=prior, dialog=dialog), PassResult
    )
    surprise = None
    if surprised(prior, posterior):
        inp = c.SurpriseInput(request=req, ctx=bundle.posterior, prior=prior, posterior=posterior)
        surprise = await memory_step(s, c.EXTRACT_SURPRISE, inp, Surprise)
    calibrate = c.CalibrateInput(
        request=req,
        confidence=posterior.confidence,
        ctx=bundle.posterior,
        now=now,
        gate_key=gate_key,
        action=posterior.action,
    )
    calibration = await memory_step(s, c.CALIBRATE, calibrate, Calibration)
    if posterior.used_chunk_ids:
        # ACT-R rule 2: only the memories the proxy actually used get a trace.
        reinforce = c.ReinforceInput(principal=req.principal, n=n, chunk_ids=posterior.used_chunk_ids)
        await memory_step(s, c.REINFORCE, reinforce, list[str])
    return c.ConsultResult(
        prior=prior,
        posterior=posterior,
        surprise=surprise,
        calibration=calibration,
        lineage=bundle.posterior.lineage_history,
    )


async def converse(s: GateState, reviewer_text: str, by: AnsweredBy, responder: str | None = None) -> bool:
    """Add the reviewer's line and the agent side's reply; False if the reply is empty."""
    s.dialog.append(DialogTurn(speaker="reviewer", text=reviewer_text, answered_by=by, responder=responder))
    s.details.dialog = list(s.dialog)  # the human sees what was asked, answered or not
    reply = await memory_step(s, c.AGENT_REPLY, c.AgentReplyInput(request=s.req, dialog=s.dialog), c.AgentReply)
    s.usage = s.usage + reply.usage
    if not reply.text.strip():
        return False
    s.dialog.append(DialogTurn(speaker="agent", text=reply.text))
    s.details.dialog = list(s.dialog)
    return True


# -- the record -------------------------------------------------------------------


def outcome(
    s: GateState, n: int, action: Action, text: str, consulted: c.ConsultResult | None, **more
) -> OutcomeRecord:
    return OutcomeRecord(
        request=s.req,
        n=n,
        workflow_id=s.details.workflow_id,
        action=action,
        response_text=text,
        prior=consulted.prior if consulted else None,
        posterior=consulted.posterior if consulted else None,
        surprise=consulted.surprise if consulted else None,
        at=workflow.now(),
        dialog=list(s.dialog),
        calibration=consulted.calibration if consulted else None,
        started_at=workflow.info().start_time,
        escalated_at=s.details.escalated_at,
        **more,
    )


async def record(
    s: GateState, n: int, action: Action, text: str, by: AnsweredBy, responder: str | None, consulted: c.ConsultResult
) -> None:
    """Record the outcome until it lands (record_outcome is idempotent per gate):
    nothing the human said is lost."""
    # "… but ask me first": what the person's answer says of the kind beyond its action.
    ask_first = by is AnsweredBy.human and s.answer is not None and s.answer.ask_first
    record = outcome(
        s,
        n,
        action,
        text,
        consulted,
        answered_by=by,
        responder=responder,
        responder_identity=s.identity,
        ask_first=ask_first,
    )
    wait, note = timedelta(seconds=1), s.details.calibration_note
    while True:
        try:
            await memory_step(s, c.RECORD_OUTCOME, record, str, c.RECORD_OPTIONS)
            s.details.calibration_note = note
            return
        except Failed as exc:
            workflow.logger.warning("gate %s: recording waits for the memory: %s", s.req.gate_id, cause_message(exc))
            # Shown by the `details` query only (no command): the answer is in, its
            # record is what waits, and why.
            who = responder or ("the proxy" if by is AnsweredBy.proxy else by.value)
            s.details.calibration_note = f"answered by {who}; recording waits: {cause_message(exc)}"
        await workflow.sleep(wait)
        wait = min(wait * 2, REPAIR_WAIT_CAP)


async def keep_unanswered(s: GateState, n: int, action: Action, text: str, cancelled: bool = False) -> None:
    """Keep a gate nobody answered (its deadline passed, or it was cancelled) in the
    audit trail, apart from the outcomes, which teach the proxy; with the proxy's guess
    if it made one. A few attempts: the gate's result stands without it."""
    record = outcome(s, n, action, text, s.consulted, cancelled=cancelled, answered_by=AnsweredBy.nobody)
    try:
        await memory_step(s, c.RECORD_UNANSWERED, record, bool, c.RECORD_OPTIONS)
    except Failed as exc:
        workflow.logger.warning("gate %s: not kept in the audit trail: %s", s.req.gate_id, cause_message(exc))


# -- what an escalated gate tells -------------------------------------------------


def set_status(s: GateState, status: GateStatus, confidence: float | None = None) -> None:
    s.details.status = status
    updates: list[SearchAttributeUpdate[Any]] = [sa.STATUS.value_set(status.value)]
    if confidence is not None:
        updates.append(sa.CONFIDENCE.value_set(confidence))
    workflow.upsert_search_attributes(updates)


def publish_escalation(s: GateState) -> None:
    """What `vicar escalations` shows, in the memo: visibility carries it, so the list
    needs no worker. Clipped: a memo rides in every listing."""
    workflow.upsert_memo({c.ESCALATION_MEMO: shown(s.details).model_dump(mode="json")})


async def read_excerpts(s: GateState) -> None:
    """The worker's excerpts of the artifact files, for a person who cannot read them
    (a person must see what they approve); the details' one-line excerpt comes
    from the first file when there is no inline text."""
    paths = s.req.artifact_paths
    if not paths:
        return
    try:
        files = await workflow.execute_local_activity(
            c.ARTIFACT_EXCERPTS, ExcerptInput(paths=paths), result_type=list[ArtifactFile], **c.EXCERPT_OPTIONS
        )
    except ActivityError as exc:
        if is_cancel(exc):
            raise
        why = f"the worker could not read it: {cause_message(exc)}"
        s.artifact_files = [ArtifactFile(path=p, error=why) for p in paths]
        return
    if not s.details.artifact_excerpt:
        s.details.artifact_excerpt = next((excerpt_line(f.excerpt) for f in files if f.excerpt), "")
    s.artifact_files = files


async def notify(s: GateState, event: str, withdrawn: c.AutonomyWithdrawn | None = None) -> None:
    """Tell the webhook (if the worker has one); a receiver that stays down is logged
    (the escalation is in visibility and the UI, a withdrawal holds, whatever it does)."""
    notice = c.Notice(
        event=event,
        event_id=f"{s.details.workflow_id}/{event}",
        gate=shown(s.details),
        deadline=s.deadline_at,
        withdrawn=withdrawn,
    )
    try:
        await workflow.execute_activity(c.NOTIFY, notice, result_type=bool, **c.NOTIFY_OPTIONS)
    except ActivityError as exc:
        if is_cancel(exc):
            raise
        workflow.logger.warning("gate %s: the webhook was not told (%s): %s", s.req.gate_id, event, cause_message(exc))


async def vet(
    s: GateState, answer: HumanAnswer, *, update_id: str | None = None, signal_ordinal: int | None = None
) -> c.AnswerVerdict:
    """Judge an answer when it comes: the principal's allow-list as it is then, and the
    Temporal identity the answer came with, read from the gate's own history. A regular
    activity, never local: it reads the update's accepted event, which is in history only
    once this workflow task has completed."""
    assert answer.responder
    info = workflow.info()
    inp = c.AnswerVet(
        principal=s.req.principal,
        workflow_id=info.workflow_id,
        run_id=info.run_id,
        responder=answer.responder,
        update_id=update_id,
        signal_ordinal=signal_ordinal,
    )
    try:
        return await memory_step(s, c.VET_ANSWER, inp, c.AnswerVerdict, c.VET_OPTIONS, local=False)
    except Failed as exc:
        return c.AnswerVerdict(allowed=False, why=f"the answer could not be checked: {cause_message(exc)}")


async def take_signalled(s: GateState, answer: HumanAnswer, ordinal: int) -> None:
    """A signalled answer, judged now: the checks, then the allow-list and identity."""
    try:
        check(s, answer)
    except ValueError as exc:
        workflow.logger.warning("ignored human_response from %s: %s", answer.responder, exc)
        return
    verdict = await vet(s, answer, signal_ordinal=ordinal)
    if not verdict.allowed or s.answer is not None:
        why = verdict.why or "the gate already has an answer"
        workflow.logger.warning("ignored human_response from %s: %s", answer.responder, why)
        return
    s.answer, s.identity = answer, verdict.identity


def ignore_early(s: GateState, why: str) -> None:
    for answer, _ in s.early:
        workflow.logger.warning("ignored human_response from %s: %s", answer.responder, why)
    s.early.clear()


# -- the end ----------------------------------------------------------------------


async def finish(s: GateState, result: GateResult) -> GateResult:
    """Keep a gate whose deadline passed in the audit trail, tell the session the gate is
    done (its memory is ready for consolidation), and give back a turn still owed."""
    req = s.req
    metrics.finished(req, result, s.details.escalated_at)
    if result.timed_out:
        await keep_unanswered(s, result.n, result.action, result.text)
    if s.in_session:
        done = SessionGate(
            gate_id=req.gate_id,
            workflow_id=s.details.workflow_id,
            escalated=result.escalated,
            answered_by=result.answered_by,
            usage=result.usage,
        )
        try:
            session = workflow.get_external_workflow_handle(c.session_workflow_id(req.principal, req.session_id or ""))
            await session.signal(c.GATE_DONE_SIGNAL, done)
        except Exception as exc:  # the session has ended: the gate's answer stands
            workflow.logger.warning("session %s did not take gate %s: %s", req.session_id, req.gate_id, exc)
    if s.turn_owed and s.turn.wanted:
        # Asked after its record was in, the brain may not have seen the record: the
        # last thing before completing, so a request arriving during any earlier
        # await is not missed (one arriving with the completion makes the server
        # refuse it, and the workflow task runs again with the signal).
        await release(s)
    return result
