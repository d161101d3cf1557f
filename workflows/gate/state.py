"""The gate's state and what it shows: one dataclass that the gate's steps
(workflows/gate/steps.py) read and change, and the plain functions over it that decide
nothing in Temporal: the checks an answer must pass, the details the `details` query
returns, the clipped copy the memo and the webhook carry, the text the Temporal UI shows
while the gate waits, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import (
        Action,
        AnsweredBy,
        Calibration,
        DialogTurn,
        GateDetails,
        GateRequest,
        GateResult,
        GateStatus,
        HumanAnswer,
        ModelPin,
        OutcomeRecord,
        PassResult,
        RequestKind,
        Usage,
    )
    from vicar.models.brain import TurnRequest
    from vicar.models.control import Verdict
    from vicar.models.view import ArtifactFile, excerpt_line
    from vicar.workflows.turn import Turn

# Each text an escalated gate shows in its memo (visibility listings carry it).
MEMO_TEXT_CHARS = 1000
# Pre-review items the memo, the webhook and the UI carry (the query has them all).
SHOWN_PREREVIEW = 4
# What a second run of a recorded gate id says (contracts.RECORDED_OUTCOME).
ALREADY = "this gate id's outcome was recorded by an earlier run; nobody was asked again"


@dataclass
class GateState:
    """Everything one gate knows. Made when the workflow starts, before any handler
    runs; the workflow's handlers and its steps read and change it."""

    req: GateRequest
    details: GateDetails
    turn: Turn = field(default_factory=Turn)
    # How the worker runs the proxy's steps (from the turn's ticket and grant).
    local_steps: bool = False
    max_dialog_turns: int = 5
    shard: int | None = None  # where the principal's memory lives (None: unsharded)
    shard_wait: float = 60.0  # seconds a memory step waits for the shard's owner
    default_deadline: float = 0.0  # the worker's VICAR_GATE_DEADLINE_SECONDS (0: none)
    release_by_signal: bool = True  # False: the outcome record gives the turn back (workflows/brain.py)
    turn_owed: bool = False  # holding the turn until the record lands or a release is asked for
    # The consult.
    pin: ModelPin | None = None  # the learned model this gate decides with
    pinned: bool = False  # pinned with the outcome lookup (steps.recorded_outcome): not again
    verdict: Verdict | None = None  # what the human's control said of this gate (None: nothing)
    consulted: c.ConsultResult | None = None  # the consult the result was built from (the audit trail's)
    dialog: list[DialogTurn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    working_memory: str = ""  # the session's (the cacheable prefix of the gate's prompts)
    in_session: bool = False
    # The human.
    answer: HumanAnswer | None = None  # accepted: later answers are refused while it is recorded
    identity: str | None = None  # the accepted answer's caller identity
    # human_response signals not yet judged, with their place among this run's signals
    # (which event in history carries the caller's identity)
    early: list[tuple[HumanAnswer, int]] = field(default_factory=list)
    signals: int = 0
    deadline_at: datetime | None = None  # when the gate stops waiting for the human (None: never)
    artifact_files: list[ArtifactFile] = field(default_factory=list)  # the worker's excerpts (ARTIFACT_QUERY)

    @classmethod
    def start(cls, req: GateRequest, workflow_id: str) -> GateState:
        details = GateDetails(
            gate_id=req.gate_id,
            principal=req.principal,
            state=req.state,
            task_type=req.task_type,
            status=GateStatus.queued,
            question=req.question,
            escalation_mode=req.escalation_mode,
            workflow_id=workflow_id,
            artifact_excerpt=excerpt_line(req.artifact_text),
            upstream_agent=req.upstream_agent,
        )
        return cls(req=req, details=details)

    def turn_ask(self, attempt: int = 0) -> c.TurnAsk:
        turn = TurnRequest(gate_id=self.req.gate_id, workflow_id=self.details.workflow_id)
        return c.TurnAsk(principal=self.req.principal, turn=turn, attempt=attempt)


# -- an answer's checks -----------------------------------------------------------


def check(s: GateState, answer: HumanAnswer) -> None:
    """What any answer must be to be taken now (ValueError says why not); who may give
    it is judged when it comes (steps.vet)."""
    d = s.details
    if d.status is not GateStatus.escalated:
        raise ValueError(f"gate is not waiting for a human answer (status: {d.status.value})")
    if s.answer is not None:
        raise ValueError("gate already has a human answer")
    valid = [a.value for a in s.req.valid_actions]
    if answer.action not in valid:
        raise ValueError(f"unknown action {answer.action!r}; valid actions: {', '.join(valid)}")
    if answer.action == Action.dialog.value:
        if not answer.text.strip():
            raise ValueError("a dialog answer needs text: the question or point for the agent")
        asked = sum(1 for t in s.dialog if t.speaker == "reviewer" and t.answered_by is AnsweredBy.human)
        if asked >= s.max_dialog_turns:
            raise ValueError(
                f"dialog limit ({s.max_dialog_turns} turns) reached: "
                f"answer with approve, correct, reject, hold or withdraw"
            )
    if not answer.responder:
        raise ValueError("an answer needs a responder: who is answering (vicar answer --responder NAME)")


def final(s: GateState, action: Action | None, text: str) -> tuple[Action, str]:
    """The design: dialog followed by approve becomes correct, with the dialog as
    feedback, so the agent gets another pass with the reviewer's context."""
    assert action is not None and action is not Action.dialog
    if action is Action.approve and s.dialog:
        transcript = "\n".join(f"{t.speaker.upper()}: {t.text}" for t in s.dialog)
        return Action.correct, f"{text}\n\nFrom the review dialog:\n{transcript}".strip()
    return action, text


# -- the human's control over the consult (steps.obey) ------------------------------


def forced(s: GateState) -> bool:
    """A pause or an `ask` rule sends this gate to the human whatever the proxy says."""
    return s.verdict is not None and s.verdict.escalate


def overruled(s: GateState, consulted: c.ConsultResult) -> c.ConsultResult:
    """The consult as the human's control leaves it: a pause or an ask rule replaces
    the guard that decided, with its reason (the proxy's guess stays, for the human)."""
    v = s.verdict
    if v is None or not v.escalate:
        return consulted
    cal = consulted.calibration.model_copy(
        update={
            "guard": v.guard,
            "note": v.reason,
            "autonomous": False,
            "fired": [v.guard, *consulted.calibration.fired],
            "rule": v.rule.name if v.rule else None,
            "rule_author": v.rule.author if v.rule else None,
        }
    )
    return consulted.model_copy(update={"calibration": cal})


def answerer(s: GateState) -> tuple[AnsweredBy, str | None]:
    """Who answered a gate nobody escalated: a rule (and its author), or the proxy."""
    v = s.verdict
    if v is not None and not v.escalate and v.rule is not None:
        return AnsweredBy.rule, v.rule.author or None
    return AnsweredBy.proxy, None


def unavailable(reason: str) -> c.ConsultResult:
    """The consult of a gate whose proxy could not run: no guess, the reason as its guard's note."""
    failed = PassResult(prose="", note=reason, confidence=0.0)
    calibration = Calibration(confidence=0.0, guard="proxy_error", note=reason)
    return c.ConsultResult(prior=failed, posterior=failed, calibration=calibration)


# -- what the gate shows ------------------------------------------------------------


def show(s: GateState, consulted: c.ConsultResult) -> None:
    """The consult on the gate's details (the `details` query, `gate show`, the inbox)."""
    d = s.details
    d.proxy_action = consulted.posterior.action
    d.proxy_tap = consulted.posterior.tap
    d.proxy_text = consulted.posterior.prose or consulted.posterior.note
    d.proxy_confidence = consulted.calibration.confidence
    d.calibration_guard = consulted.calibration.guard
    d.calibration_note = consulted.calibration.note
    d.autonomy_threshold = consulted.calibration.threshold_shown  # for the reason's words (vicar.proxy.reasons)
    d.autonomy_target = consulted.calibration.target
    d.proxy_supported = consulted.calibration.supported
    d.proxy_support_label = consulted.calibration.support_label
    d.prereview = list(consulted.posterior.prereview)
    d.unsupported = list(consulted.posterior.unsupported)
    d.lineage_verdicts = list(consulted.lineage)


def shown(d: GateDetails) -> GateDetails:
    """The gate's details with each text clipped, for the memo and the webhook."""
    clip = MEMO_TEXT_CHARS
    return d.model_copy(
        update={
            "question": d.question[:clip],
            "proxy_text": d.proxy_text[:clip],
            "calibration_note": d.calibration_note[:clip],
            "dialog": [t.model_copy(update={"text": t.text[:clip]}) for t in d.dialog],
            "prereview": [
                i.model_copy(update={"text": i.text[:clip], "features": {}}) for i in d.prereview[:SHOWN_PREREVIEW]
            ],
            "unsupported": [u[:clip] for u in d.unsupported[:SHOWN_PREREVIEW]],
        }
    )


def ui_details(s: GateState, posterior: PassResult, calibration: Calibration) -> str:
    """The Temporal UI's text while the gate waits: what is asked, about what, the
    proxy's words and the person's own past words behind them."""
    req, d = s.req, s.details
    lines = [
        f"**Waiting for {req.principal}** — {req.state.value} / {req.task_type}",
        f"**Question:** {req.question}",
    ]
    if d.artifact_excerpt:
        lines.append(f"**Artifact:** {d.artifact_excerpt}")
    if req.upstream_agent:
        lines.append(f"**From agent:** {req.upstream_agent}")
    if d.deadline is not None:
        lines.append(f"**Deadline:** {d.deadline.isoformat()}")
    lines.append(
        f"**Proxy's guess** ({posterior.action.value if posterior.action else 'no prediction'}, "
        f"confidence {calibration.confidence:.2f}, guard {calibration.guard}): {posterior.prose or posterior.note}"
    )
    if calibration.note:
        lines.append(f"**Why:** {calibration.note}")
    if d.prereview:
        lines.append(
            "**Their own past words:**\n"
            + "\n".join(f"- {i.text[:300]} ({i.action}, gate {i.gate_id or i.chunk_id})" for i in d.prereview[:3])
        )
    if d.unsupported:
        lines.append("**Unsupported by their words:** " + "; ".join(u[:200] for u in d.unsupported[:3]))
    verb = "answer" if req.kind is RequestKind.question else "ACTION"
    lines.append(
        f'Answer with `vicar answer {req.gate_id} {verb} "text"`, or see it all: `vicar gate show {req.gate_id}`.'
    )
    return "\n\n".join(lines)


# -- the result -------------------------------------------------------------------


def result(
    s: GateState,
    n: int,
    action: Action,
    text: str,
    consulted: c.ConsultResult,
    *,
    escalated: bool,
    answered_by: AnsweredBy,
    responder: str | None,
) -> GateResult:
    s.consulted = consulted
    req, cal = s.req, consulted.calibration
    return GateResult(
        gate_id=req.gate_id,
        principal=req.principal,
        state=req.state,
        task_type=req.task_type,
        action=action,
        text=text,
        confidence=cal.confidence,
        prior_confidence=consulted.prior.confidence,
        calibration_guard=cal.guard,
        calibration_note=s.details.calibration_note,
        escalated=escalated,
        answered_by=answered_by,
        responder=responder,
        n=n,
        surprise=consulted.surprise,
        dialog=list(s.dialog),
        usage=s.usage,
        autonomy_threshold=cal.threshold,
        autonomy_bound=cal.bound,
        autonomy_evidence=cal.evidence,
        model_version=s.pin.version if s.pin else None,
        prereview=list(consulted.posterior.prereview),
        unsupported=list(consulted.posterior.unsupported),
    )


def result_from_record(req: GateRequest, rec: OutcomeRecord) -> GateResult:
    """A gate id is single-use per principal: a second run (Temporal lets a client start
    a finished id again) returns the first run's recorded outcome, asking nobody."""
    cal = rec.calibration
    return GateResult(
        gate_id=req.gate_id,
        principal=req.principal,
        state=rec.request.state,
        task_type=rec.request.task_type,
        action=rec.action,
        text=rec.response_text,
        confidence=cal.confidence if cal else 0.0,
        prior_confidence=rec.prior.confidence if rec.prior else 0.0,
        calibration_guard=cal.guard if cal else "",
        calibration_note=ALREADY,
        escalated=rec.answered_by is AnsweredBy.human,
        answered_by=rec.answered_by,
        responder=rec.responder,
        responder_identity=rec.responder_identity,
        n=rec.n,
        surprise=rec.surprise,
        dialog=list(rec.dialog),
        autonomy_threshold=cal.threshold if cal else None,
        autonomy_bound=cal.bound if cal else None,
        autonomy_evidence=cal.evidence if cal else 0,
        prereview=list(rec.posterior.prereview) if rec.posterior else [],
        unsupported=list(rec.posterior.unsupported) if rec.posterior else [],
    )
