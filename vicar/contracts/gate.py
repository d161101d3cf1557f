"""The gate's contract (workflows/gate/): its names, id, the payloads of its activities
and how long each may take. Workflows call activities by name so workflow modules never
import the heavy activity code (numpy, chromadb, torch, LLM SDKs)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio.common import RetryPolicy

from vicar.contracts.brain import HOLDER_SIGNALS
from vicar.contracts.handles import Handles
from vicar.models import (
    Action,
    Calibration,
    DialogTurn,
    GateDetails,
    GateRequest,
    LineageVerdict,
    ModelPin,
    OutcomeRecord,
    PassResult,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.models.audit import Review
from vicar.models.control import Control

GATE_WORKFLOW = "VicarGate"
HUMAN_RESPONSE_SIGNAL = "human_response"
RESPOND_UPDATE = "respond"
DETAILS_QUERY = "details"
# The worker's excerpts of the artifact's files, for a person reviewing from another machine.
ARTIFACT_QUERY = "artifact_files"
# An escalated gate puts what `vicar escalations` shows into its memo under this key,
# readable from visibility with no worker running.
ESCALATION_MEMO = "vicar_escalation"

# Vicar's default rules (what cannot be undone) are matched at every gate, a principal
# with no rules of their own included: gates started before them keep the old path.
DEFAULT_RULES_PATCH = "default-rules"
# The outcome lookup and the model's pin in one local activity (LOOK_UP_AND_PIN): one
# dispatch fewer per gate; gates started before it look up and pin in two.
LOOKUP_PIN_PATCH = "lookup-with-pin"

GATE_HANDLES = Handles(
    GATE_WORKFLOW,
    signals=(HUMAN_RESPONSE_SIGNAL, *HOLDER_SIGNALS),
    updates=(RESPOND_UPDATE,),
    queries=(DETAILS_QUERY, ARTIFACT_QUERY),
    patches=(DEFAULT_RULES_PATCH, LOOKUP_PIN_PATCH),
)

# What the contract asks of a client starting a gate (docs/orchestrator.md, `vicar schema`). The worker
# does not rely on it: a second run under a recorded id returns the recorded outcome.
GATE_ID_REUSE_POLICY = "REJECT_DUPLICATE"
GATE_ID_REUSE_NOTE = (
    "Start a gate with workflow id vicar-gate/<gate_id> and id-reuse policy REJECT_DUPLICATE "
    "(id-conflict policy USE_EXISTING to attach to a running one): a gate id is used once per "
    "principal. A client that starts a finished id again anyway gets a second run that returns "
    "the outcome already recorded, asking nobody."
)


def gate_workflow_id(gate_id: str) -> str:
    return f"vicar-gate/{gate_id}"


# Activities. The consult path in one step (fast, local predictors), or step by step:
CONSULT = "consult"  # ConsultInput -> ConsultResult
RETRIEVE = "retrieve_context"  # RetrieveInput -> RetrievalBundle
PRIOR_PASS = "prior_pass"  # PassInput -> PassResult
POSTERIOR_PASS = "posterior_pass"  # PassInput -> PassResult
EXTRACT_SURPRISE = "extract_surprise"  # SurpriseInput -> Surprise
CALIBRATE = "calibrate"  # CalibrateInput -> Calibration
REINFORCE = "reinforce"  # ReinforceInput -> list[str]
AGENT_REPLY = "agent_reply"  # AgentReplyInput -> AgentReply
PIN_MODEL = "pin_model"  # principal -> ModelPin | None: the learned model for this gate (refit if due)
# The human's rules, matched where the artifact is read: RulesInput -> Verdict | None.
MATCH_RULES = "match_rules"
RECORD_OUTCOME = "record_outcome"  # OutcomeRecord -> chunk id
RECORD_UNANSWERED = "record_unanswered"  # OutcomeRecord -> bool: a gate that ended with no answer
# A gate id is single-use per principal: a run under an id whose outcome is recorded
# returns that outcome (OutcomeLookup -> OutcomeRecord | None) and asks nobody.
RECORDED_OUTCOME = "recorded_outcome"
# The same lookup and, when nothing is recorded, PIN_MODEL's pin, in one step run as a
# local activity: OutcomeLookup -> LookupAndPin.
LOOK_UP_AND_PIN = "look_up_and_pin"
# An answer judged when it comes (the allow-list read then, the caller's identity from
# history): AnswerVet -> AnswerVerdict.
VET_ANSWER = "vet_answer"
# The artifact files' bounded excerpts (ExcerptInput -> list[ArtifactFile]), read by the worker.
ARTIFACT_EXCERPTS = "artifact_excerpts"
NOTIFY = "notify"  # Notice -> bool (sent; False: no webhook configured)
# The gate's activities, all of them: what its activity class defines (tests/test_house_plan.py).
GATE_ACTIVITIES = (
    CONSULT,
    RETRIEVE,
    PRIOR_PASS,
    POSTERIOR_PASS,
    EXTRACT_SURPRISE,
    CALIBRATE,
    REINFORCE,
    AGENT_REPLY,
    PIN_MODEL,
    MATCH_RULES,
    RECORD_OUTCOME,
    RECORD_UNANSWERED,
    RECORDED_OUTCOME,
    LOOK_UP_AND_PIN,
    VET_ANSWER,
    ARTIFACT_EXCERPTS,
    NOTIFY,
)


def _retried(timeout: timedelta, attempts: int, first: timedelta, most: timedelta) -> dict[str, Any]:
    return dict(
        start_to_close_timeout=timeout,
        retry_policy=RetryPolicy(initial_interval=first, maximum_interval=most, maximum_attempts=attempts),
    )


_MS200 = timedelta(milliseconds=200)
# A proxy step that keeps failing gives up after a few attempts and the gate goes to the
# human: a broken provider must not hold the principal's turn (and every gate queued
# behind it) for ever. Non-retryable errors (a bad key) give up at once.
STEP_OPTIONS = _retried(timedelta(minutes=5), 6, _MS200, timedelta(seconds=10))
# The whole consult with a local predictor (learned or offline) takes well under a second,
# a few with a fit: a minute is its bound. A worker killed mid-consult holds the gate until
# the bound runs out, then another worker's retry takes it (with STEP_OPTIONS' 5 minutes,
# test_multiworker's gates waited that long after the SIGKILL).
CONSULT_OPTIONS = _retried(timedelta(minutes=1), 6, _MS200, timedelta(seconds=10))
# Pinning the learned model may fit it (about 2 s at 10,000 answers): a few attempts,
# then the proxy is unavailable and the human decides.
PIN_OPTIONS = _retried(timedelta(minutes=2), 4, _MS200, timedelta(seconds=5))
# Matching reads the artifact's files at most: a few quick attempts, then the gate asks
# the human (a rule is never skipped because it could not be checked).
MATCH_OPTIONS = _retried(timedelta(minutes=1), 4, _MS200, timedelta(seconds=5))
# Recording an outcome retries until it lands: nothing the human said is lost. A few
# attempts here, then the gate waits with a durable timer and tries again: a local
# activity retried for ever (a broken store) also kept the worker from shutting down.
RECORD_OPTIONS = _retried(timedelta(minutes=5), 5, _MS200, timedelta(seconds=5))
LOOKUP_OPTIONS = _retried(timedelta(seconds=60), 5, _MS200, timedelta(seconds=5))
# The lookup with the pin: the pin's bound (a fit may run). Few attempts: if they fail, the
# lookup runs alone (its own attempts) and the consult pins again (PIN_OPTIONS').
LOOKUP_PIN_OPTIONS = _retried(timedelta(minutes=2), 3, _MS200, timedelta(seconds=5))
# Judging an answer when it comes (allow-list, caller identity): a few quick attempts,
# then the answer is refused with the reason (the human can answer again).
VET_OPTIONS = _retried(timedelta(seconds=30), 5, _MS200, timedelta(seconds=2))
# Reading a few excerpts is quick; a worker that cannot does not hold the escalation up.
EXCERPT_OPTIONS: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(seconds=10), retry_policy=RetryPolicy(maximum_attempts=2)
)
# Telling the webhook: a receiver that is down gets a few minutes of retries, then the
# gate goes on without it (the escalation is in visibility and the UI regardless).
NOTIFY_OPTIONS = _retried(timedelta(seconds=30), 8, timedelta(seconds=1), timedelta(seconds=30))


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
    action: Action | None = None  # the proposed answer, which the person's answers must back (support)


class RulesInput(BaseModel):
    request: GateRequest
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


class LookupAndPin(BaseModel):
    """LOOK_UP_AND_PIN's answer: the outcome already recorded under the gate's id, or
    (none recorded) the model the gate decides with, pinned under its turn."""

    outcome: OutcomeRecord | None = None
    pinned: bool = False  # False: nothing pinned (an outcome was found)
    pin: ModelPin | None = None  # None when pinned: a predictor without versions


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


class AutonomyWithdrawn(BaseModel):
    state: str = Field(description="The context's workflow state.")
    task_type: str = Field(description="The context's task type.")
    reason: str = Field(description="What the audits showed, and how autonomy is re-earned.")


# Defined after what it names: a model whose types are all defined when its class is
# made is complete at import. The workflow sandbox could not complete one later (its
# module is not among the sandbox's modules), and a gate failed its task at the notice.
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
    review: Review | None = Field(None, description="The review that overruled the answer (event overruled).")
    withdrawn: AutonomyWithdrawn | None = Field(
        None, description="The context whose autonomy was withdrawn, and why (event autonomy_withdrawn)."
    )
