"""Activity names and payloads shared by workflows and activities.

Workflows call activities by name so workflow modules never import the heavy
activity code (numpy, chromadb, torch, LLM SDKs).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from vicar.errors import STORE_UNAVAILABLE  # noqa: F401  (error types are named in vicar/errors.py)
from vicar.memory.consolidation_plan import ConsolidationPlan
from vicar.memory.transfer import Snapshot
from vicar.models import (
    Calibration,
    DialogTurn,
    GateDetails,
    GateRequest,
    LineageVerdict,
    ModelPin,
    PassResult,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.models.audit import Review
from vicar.models.brain import BrainConfig, TurnRequest
from vicar.models.control import Control
from vicar.models.session import SessionJoin

BRAIN_WORKFLOW = "VicarBrain"
GATE_WORKFLOW = "VicarGate"
MOVE_WORKFLOW = "VicarMove"
SESSION_WORKFLOW = "VicarSession"
CONSOLIDATION_WORKFLOW = "VicarConsolidation"
WORKFLOW_NAMES: tuple[str, ...] = (
    BRAIN_WORKFLOW,
    GATE_WORKFLOW,
    MOVE_WORKFLOW,
    SESSION_WORKFLOW,
    CONSOLIDATION_WORKFLOW,
)
# Signal, update and query names: the handlers' names in history, so renaming one breaks
# running workflows. The brain's:
TAKE_TURN_UPDATE = "take_turn"
REQUEST_TURN_SIGNAL = "request_turn"
RELEASE_TURN_SIGNAL = "release_turn"
SET_SHARD_UPDATE = "set_shard"
BRAIN_STATUS_QUERY = "status"
# The human's rules and pauses (vicar/models/control.py): changed by the update, read by the query.
CONTROL_UPDATE = "control"
CONTROL_QUERY = "control_state"
# A turn holder's (gate, consolidation, move):
TURN_GRANTED_SIGNAL = "turn_granted"
TURN_WANTED_SIGNAL = "turn_wanted"
# The gate's:
HUMAN_RESPONSE_SIGNAL = "human_response"
RESPOND_UPDATE = "respond"
DETAILS_QUERY = "details"
# The session's:
JOIN_UPDATE = "join"
GATE_DONE_SIGNAL = "gate_done"
END_SIGNAL = "end"
SUMMARY_QUERY = "summary"
SIGNALS: tuple[str, ...] = (
    REQUEST_TURN_SIGNAL,
    RELEASE_TURN_SIGNAL,
    TURN_GRANTED_SIGNAL,
    TURN_WANTED_SIGNAL,
    HUMAN_RESPONSE_SIGNAL,
    GATE_DONE_SIGNAL,
    END_SIGNAL,
)
UPDATES = (TAKE_TURN_UPDATE, SET_SHARD_UPDATE, RESPOND_UPDATE, JOIN_UPDATE, CONTROL_UPDATE)
QUERIES: tuple[str, ...] = (BRAIN_STATUS_QUERY, DETAILS_QUERY, SUMMARY_QUERY, CONTROL_QUERY)
# Moving a principal's memory to another shard (workflows/move.py).
EXPORT_MEMORY = "export_memory"
EXPORT_PIECE = "export_piece"
IMPORT_PIECE = "import_piece"
INSTALL_MEMORY = "install_memory"
REMOVE_MEMORY = "remove_memory"
SET_SHARD = SET_SHARD_UPDATE  # the activity is named after the update it sends

REQUEST_TURN = REQUEST_TURN_SIGNAL  # (sent as the update, or queued as this signal)
RELEASE_TURN = RELEASE_TURN_SIGNAL
READ_COUNTER = "read_counter"
MIRROR_COUNTER = "mirror_counter"  # brains started before TURN_BY_RECORD only
ADVANCE_TURN = "advance_turn"
# The turn protocol where a gate that recorded its outcome gives the turn back by that
# record (the brain reads it when the next gate asks) instead of a release signal.
# Brains and gates started before it replay the release signal and the plain mirror.
TURN_BY_RECORD = "turn-by-record"
# An escalated gate puts what `vicar escalations` shows into its memo, readable from
# visibility with no worker running (gates escalated before this have none).
ESCALATION_MEMO = "vicar_escalation"
# Gates started before deadlines (and the webhook, and the cancelled status) have none.
GATE_DEADLINE = "gate-deadline"
NOTIFY = "notify"  # Notice -> bool (sent; False: no webhook configured)
RETRIEVE = "retrieve_context"
PRIOR_PASS = "prior_pass"
POSTERIOR_PASS = "posterior_pass"
EXTRACT_SURPRISE = "extract_surprise"
CALIBRATE = "calibrate"
REINFORCE = "reinforce"
RECORD_OUTCOME = "record_outcome"
JOIN_SESSION = "join_session"
LOAD_WORKING_MEMORY = "load_working_memory"
PLAN_CONSOLIDATION = "plan_consolidation"
APPLY_CONSOLIDATION = "apply_consolidation"
CONSULT = "consult"  # the whole consult path in one step (fast, local predictors)
AGENT_REPLY = "agent_reply"
PIN_MODEL = "pin_model"  # principal -> ModelPin | None: the learned model for this gate (refit if due)
ALLOWED_RESPONDERS = "allowed_responders"  # principal -> who may answer for them ([]: anyone)
# An answer judged when it comes (allow-list read then, the caller's identity from
# history): AnswerVet -> AnswerVerdict. Gates started before it judge by the list read at
# escalation and record no identity.
VET_ANSWER = "vet_answer"
VET_ANSWERS = "vet-answers"
# A gate id is single-use per principal: a run under an id whose outcome is recorded
# returns that outcome (OutcomeLookup -> OutcomeRecord | None) and asks nobody.
RECORDED_OUTCOME = "recorded_outcome"
GATE_ONCE = "gate-once"
# Gates started before the learned model was pinned replay without the PIN_MODEL step.
MODEL_PIN_PATCH = "pin-learned-model"
# A gate obeys the human's rules and pauses handed over with its turn (MATCH_RULES:
# RulesInput -> Verdict | None, where the artifact is read); gates before it had none.
MATCH_RULES = "match_rules"
HUMAN_CONTROL = "human-control"
PATCH_IDS: tuple[str, ...] = (TURN_BY_RECORD, ESCALATION_MEMO, GATE_DEADLINE, VET_ANSWERS, GATE_ONCE, MODEL_PIN_PATCH)
# The brain keeps its rules and pauses in the principal's store after each change
# (KEEP_CONTROL: ControlKeep -> bool) and takes them back when it starts afresh
# (LOAD_CONTROL: CounterInput -> Control | None); brains before it kept them only in state.
KEEP_CONTROL = "keep_control"
LOAD_CONTROL = "load_control"
CONTROL_KEPT = "control-kept"
PATCH_IDS = PATCH_IDS + (HUMAN_CONTROL, CONTROL_KEPT)
# What the contract asks of a client starting a gate (docs/orchestrator.md, `vicar schema`). The worker
# does not rely on it: a second run under a recorded id returns the recorded outcome.
GATE_ID_REUSE_POLICY = "REJECT_DUPLICATE"
GATE_ID_REUSE_NOTE = (
    "Start a gate with workflow id vicar-gate/<gate_id> and id-reuse policy REJECT_DUPLICATE "
    "(id-conflict policy USE_EXISTING to attach to a running one): a gate id is used once per "
    "principal. A client that starts a finished id again anyway gets a second run that returns "
    "the outcome already recorded, asking nobody."
)


def brain_workflow_id(principal: str) -> str:
    return f"vicar-brain/{principal}"


def move_workflow_id(principal: str) -> str:
    return f"vicar-move/{principal}"


def gate_workflow_id(gate_id: str) -> str:
    return f"vicar-gate/{gate_id}"


def session_workflow_id(principal: str, session_id: str) -> str:
    return f"vicar-session/{principal}/{session_id}"


def consolidation_workflow_id(principal: str, session_id: str) -> str:
    return f"vicar-consolidation/{principal}/{session_id}"


class JoinInput(BaseModel):
    principal: str
    session_id: str
    join: "SessionJoin"


class ApplyInput(BaseModel):
    principal: str
    plan: "ConsolidationPlan"


class WorkingMemoryInput(BaseModel):
    principal: str
    token_budget: int


class TurnAsk(BaseModel):
    principal: str
    turn: TurnRequest
    config: BrainConfig | None = None  # None: the worker's default
    # Asked again after a refusal (a broken memory): a new update id, since the brain
    # run deduplicates an update id and would repeat the refusal.
    attempt: int = 0


class Notice(BaseModel):
    """What the webhook receives (JSON POST) when something happens to a gate the orchestrator must know."""

    event: Literal["escalated", "timed_out", "overruled", "autonomy_withdrawn"] = Field(
        description="What happened to the gate (overruled: a reviewer marked the proxy's answer wrong afterwards; "
        "autonomy_withdrawn: the audits of the gate's context show the proxy's error above target, so it answers "
        "nothing alone there until the same rule re-earns it; sent once per withdrawal, by the first gate to see it)."
    )
    event_id: str = Field(
        description="<workflow id>/<event>: the same for every retry of one notice (also the Idempotency-Key header)."
    )
    gate: GateDetails = Field(description="The gate as it is now.")
    deadline: datetime | None = Field(None, description="When the gate stops waiting, if it has a deadline.")
    review: "Review | None" = Field(None, description="The review that overruled the answer (event overruled).")
    withdrawn: "AutonomyWithdrawn | None" = Field(
        None, description="The context whose autonomy was withdrawn, and why (event autonomy_withdrawn)."
    )


class AutonomyWithdrawn(BaseModel):
    state: str = Field(description="The context's workflow state.")
    task_type: str = Field(description="The context's task type.")
    reason: str = Field(description="What the audits showed, and how autonomy is re-earned.")


class TurnTicket(BaseModel):
    """What the worker tells a gate when it queues it: how to run the proxy's steps."""

    local_steps: bool
    n: int | None = None  # granted at once; None: wait for the brain's turn_granted signal
    error: str | None = None  # refused: the principal's memory is unavailable (no N)
    max_dialog_turns: int = 5
    shard: int | None = None  # the memory's shard when granted at once (else on the grant)
    shard_wait_seconds: float = 60.0  # how long a memory step waits for the shard's owner
    release: bool = True  # see TurnReply.release (when granted at once)
    deadline_seconds: float = 0.0  # the worker's default gate deadline (0: none)
    control: Control | None = None  # the human's rules and pauses when granted at once (TurnReply.control)


class CounterInput(BaseModel):
    principal: str
    n: int = 0


class TurnAdvance(BaseModel):
    """Hand out `n` (mirror it) only if the turn is free: `after`, the workflow that
    holds it, has recorded its outcome (None: nobody holds it). n None: only ask."""

    principal: str
    n: int | None = None
    after: str | None = None


class TurnAdvanced(BaseModel):
    free: bool  # `after` has recorded (or nobody held the turn); when False nothing was mirrored
    counter: int  # the stored counter afterwards


class RetrieveInput(BaseModel):
    request: GateRequest
    n: int
    working_memory: str = ""


class RetrievalBundle(BaseModel):
    prior: RetrievalContext
    posterior: RetrievalContext


class PassInput(BaseModel):
    request: GateRequest
    ctx: RetrievalContext
    prior: PassResult | None = None
    dialog: list[DialogTurn] = Field(default_factory=list)


class SurpriseInput(BaseModel):
    request: GateRequest
    ctx: RetrievalContext
    prior: PassResult
    posterior: PassResult


class CalibrateInput(BaseModel):
    request: GateRequest
    confidence: float
    ctx: RetrievalContext  # the posterior's retrieval: depth and tension come from it
    now: datetime  # workflow time, for the staleness guard
    gate_key: str  # fixes the audit draw (the gate's workflow id)


class RulesInput(BaseModel):
    request: GateRequest
    control: Control


class ControlKeep(BaseModel):
    principal: str
    control: Control


class ConsultInput(BaseModel):
    request: GateRequest
    n: int
    now: datetime
    gate_key: str
    dialog: list[DialogTurn] = Field(default_factory=list)
    working_memory: str = ""
    model: ModelPin | None = None  # the learned model's pin (None: the predictor has no versions)


class ConsultResult(BaseModel):
    prior: PassResult
    posterior: PassResult
    surprise: Surprise | None = None
    calibration: Calibration
    # The person's latest verdicts on this artifact's lineage (what `gate show` and the inbox list).
    lineage: list[LineageVerdict] = Field(default_factory=list)


class AgentReplyInput(BaseModel):
    request: GateRequest
    dialog: list[DialogTurn]


class AgentReply(BaseModel):
    text: str
    usage: Usage | None = None


class ReinforceInput(BaseModel):
    principal: str
    n: int
    chunk_ids: list[str] = Field(default_factory=list)


class OutcomeLookup(BaseModel):
    principal: str
    workflow_id: str


class AnswerVet(BaseModel):
    """An answer to judge when it comes: the allow-list now, and the caller's identity
    from the gate's own history (the update's accepted event, or the signal's event)."""

    principal: str
    workflow_id: str
    run_id: str
    responder: str
    update_id: str | None = None  # an answer by the `respond` update
    signal_ordinal: int | None = None  # the k-th human_response signal (1-based) of this run


class AnswerVerdict(BaseModel):
    allowed: bool
    why: str = ""  # refused: the one line the answering client sees
    identity: str | None = None  # the Temporal client identity the answer came with


class MoveInput(BaseModel):
    principal: str
    to_shard: int = Field(ge=0)
    # Carried across continue-as-new while the pieces go over:
    move_id: str = ""
    from_shard: int | None = None
    snapshot: Snapshot | None = None
    next_piece: int = 0


class MoveStep(BaseModel):
    principal: str
    move_id: str


class MovePiece(BaseModel):
    principal: str
    move_id: str
    index: int
    data: str = ""  # base64: the payload converter writes JSON


class MoveInstall(BaseModel):
    principal: str
    move_id: str
    snapshot: Snapshot


class ShardChange(BaseModel):
    principal: str
    turn: TurnRequest  # only the turn's holder may change the shard
    shard: int


class MoveReport(BaseModel):
    principal: str
    from_shard: int | None
    to_shard: int
    moved: bool  # False: it was there already
    outcomes: int = 0
    archive_bytes: int = 0


# The audit trail (docs/audit.md): one page of a principal's gate records read where the
# memory is (AuditPageRequest -> AuditPage), and a review of an answer the proxy gave alone
# (ReviewRequest -> ReviewResult); each runs on the memory's shard after LOCATE_MEMORY.
AUDIT_WORKFLOW = "VicarAudit"
REVIEW_WORKFLOW = "VicarReview"
WORKFLOW_NAMES = WORKFLOW_NAMES + (AUDIT_WORKFLOW, REVIEW_WORKFLOW)
LOCATE_MEMORY = "locate_memory"  # principal -> MemoryPlace
AUDIT_PAGE = "audit_page"
RECORD_REVIEW = "record_review"
RECORD_UNANSWERED = "record_unanswered"  # OutcomeRecord -> bool (new): a gate that ended with no answer
# A gate whose deadline passes records itself in the audit trail; gates started before
# this end without that step.
AUDIT_UNANSWERED = "audit-unanswered"
PATCH_IDS = PATCH_IDS + (AUDIT_UNANSWERED,)
# A gate whose consult is the first to see its context's autonomy withdrawn tells the
# webhook (Notice event autonomy_withdrawn); gates before it did not.
WITHDRAWAL_NOTICE = "withdrawal-notice"
PATCH_IDS = PATCH_IDS + (WITHDRAWAL_NOTICE,)
# A holder keeps each grant under the ask it names (TurnRequest.ask) instead of forgetting
# every grant when it asks: a retried workflow task delivers the brain's grant before the
# ask that it answers runs again, and a holder before it waited for ever.
TURN_GRANT_FOR_ASK = "turn-grant-for-ask"
PATCH_IDS = PATCH_IDS + (TURN_GRANT_FOR_ASK,)
# A gate cancelled before anyone answered keeps a record in the audit trail (answered by
# nobody, `cancelled`); gates before it left none.
AUDIT_CANCELLED = "audit-cancelled"
PATCH_IDS = PATCH_IDS + (AUDIT_CANCELLED,)


def audit_workflow_id(principal: str, page_id: str) -> str:
    return f"vicar-audit/{principal}/{page_id}"


def review_workflow_id(review_id: str) -> str:
    return f"vicar-review/{review_id}"


# An escalated gate that names artifact files keeps a bounded excerpt of each, read by
# the worker (ARTIFACT_EXCERPTS: ExcerptInput -> list[ArtifactFile]) and shown by the
# ARTIFACT_QUERY: a person reviewing from another machine cannot read the worker's files.
# Gates before it kept none.
ARTIFACT_EXCERPTS = "artifact_excerpts"
ARTIFACT_QUERY = "artifact_files"
QUERIES = QUERIES + (ARTIFACT_QUERY,)
GATE_EXCERPTS = "gate-artifact-excerpts"
PATCH_IDS = PATCH_IDS + (GATE_EXCERPTS,)
# A run refuses a plain (unsealed) input or signal, and one it cannot open, in one line
# (workflows/sealed.py); runs recorded before it took plain ones and replay so.
SEALED_WRITES = "sealed-writes"
PATCH_IDS = PATCH_IDS + (SEALED_WRITES,)
# The brain continues as new when a write comes sealed with another key than its run's
# input (workflows/sealed.py KeyWatch), so a rotated-out key can be dropped; the REKEY
# signal (any one sealed argument: who asks) is that write for an idle brain.
REKEY_BRAIN = "rekey-brain"
REKEY_SIGNAL = "rekey"
PATCH_IDS = PATCH_IDS + (REKEY_BRAIN,)
SIGNALS = SIGNALS + (REKEY_SIGNAL,)
