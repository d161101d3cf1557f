"""Pydantic models at Vicar's boundaries: what crosses Temporal, the CLI and the store.

This module must stay importable inside the Temporal workflow sandbox: pydantic and
the standard library only. Beside it: the gate's vocabulary (vicar/models/vocabulary.py), the
text limits (vicar/models/limits.py), LLM usage (vicar/models/usage.py), the brain's models
(vicar/models/brain.py) and the session's (vicar/models/session.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vicar.memory.names import check_principal

# Still imported from here by files other helpers are reworking (activities/proxy.py,
# activities/turns.py, workflows/brain.py, workflows/consolidation.py, workflows/gate.py,
# workflows/move.py, workflows/turn.py); new code imports these from their own modules.
from vicar.models.brain import (  # noqa: F401
    BrainConfig,
    BrainInput,
    BrainState,
    BrainStatus,
    TurnGrant,
    TurnReply,
    TurnRequest,
)
from vicar.models.calibration import AutonomyRule, Calibration, CalibrationInputs, CensorHit, Support  # noqa: F401
from vicar.models.limits import DEFAULT_LIMITS, MAX_ARTIFACT_PATHS, NAME_CHARS, PATH_CHARS, TASK_TYPE_CHARS, TITLE_CHARS
from vicar.models.prereview import PreReviewItem
from vicar.models.schema_rules import (  # noqa: F401
    GATE_ID_PATTERN,
    GATE_ID_RE,
    NONBLANK_PATTERN,
    PRINCIPAL_PATTERN,
    RESPONDER_PATTERN,
    answer_rules,
    required_string,
)

# Re-exported as the brain's models above are (for workflows/gate.py, workflows/consolidation.py).
from vicar.models.session import (  # noqa: F401
    ConsolidationInput,
    JoinReply,
    SessionGate,
    SessionJoin,
)
from vicar.models.usage import Usage
from vicar.models.vocabulary import (
    QUESTION_ACTIONS,
    VALID_ACTIONS,
    Action,
    AnsweredBy,
    CfAState,
    EscalationMode,
    GateStatus,
    RequestKind,
)

# A confidence move bigger than this between prior and posterior is a surprise.
SURPRISE_DELTA = 0.3


RESPONDER_MAX_CHARS = 64


def check_responder(value: str) -> str:
    """A responder's name: asserted by whoever answers (not authenticated), so only
    bounded and printable; surrounding blanks are dropped."""
    name = value.strip()
    if not name or len(name) > RESPONDER_MAX_CHARS or not name.isprintable():
        raise ValueError(
            f"invalid responder {value[:RESPONDER_MAX_CHARS]!r}: 1-{RESPONDER_MAX_CHARS} printable characters"
        )
    return name


MAX_DEADLINE_SECONDS = 366 * 24 * 3600.0


class GateRequest(BaseModel):
    """One approval gate an orchestrator opens on behalf of an agent team, or (kind
    question) one question an agent asks the human mid-turn."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    kind: RequestKind = Field(
        RequestKind.gate,
        description="gate: an approval gate; question: an agent's "
        "question mid-turn, answered with action 'answer' and text.",
    )
    # The patterns are the validators' own regexes (vicar/models/schema_rules.py), which keep their messages.
    principal: str = Field(
        description="The human the proxy stands in for; names their memory's directory.",
        json_schema_extra={"pattern": PRINCIPAL_PATTERN},
    )
    gate_id: str = Field(
        description="Unique id of this gate, single-use; the workflow id is vicar-gate/<gate_id>.",
        json_schema_extra={"pattern": GATE_ID_PATTERN},
    )
    state: CfAState = Field(description="The gate's place in the agent's cycle: intent, plan or work.")
    task_type: str = Field(
        min_length=1,
        max_length=TASK_TYPE_CHARS,
        json_schema_extra={"pattern": NONBLANK_PATTERN},
        description="The kind of work (lower-cased); the proxy learns per state and task type.",
    )
    question: str = Field(
        min_length=1,
        max_length=DEFAULT_LIMITS.question,
        json_schema_extra={"pattern": NONBLANK_PATTERN},
        description="What the human is asked.",
    )
    artifact_text: str = Field(
        default="",
        max_length=DEFAULT_LIMITS.artifact_text,
        description="The artifact under review (a plan, a diff), inline.",
    )
    artifact_paths: list[
        Annotated[str, Field(min_length=1, max_length=PATH_CHARS, json_schema_extra={"pattern": NONBLANK_PATTERN})]
    ] = Field(
        default_factory=list,
        max_length=MAX_ARTIFACT_PATHS,
        description="Files the worker reads as the artifact, under its VICAR_ARTIFACT_ROOTS only.",
    )
    actor_message: str = Field(
        default="",
        max_length=DEFAULT_LIMITS.actor_message,
        description="The agent's own words to the reviewer, shown with the question.",
    )
    escalation_mode: EscalationMode = Field(
        EscalationMode.when_unsure,
        description=(
            "always: ask the human; when_unsure: the proxy answers when its rule allows; never: the proxy answers."
        ),
    )
    upstream_agent: str | None = Field(
        default=None, max_length=NAME_CHARS, description="The agent that produced the artifact (its trust is tracked)."
    )
    title: str = Field(
        default="",
        max_length=TITLE_CHARS,
        description=(
            "The artifact's title (a patch subject, a topic branch); the lineage derives from it when absent."
        ),
    )
    lineage: str | None = Field(
        default=None,
        max_length=TITLE_CHARS,
        description=("The artifact's thread across revisions (a topic branch, a patch and its rerolls)."),
    )
    revision: str | None = Field(default=None, max_length=NAME_CHARS, description="This revision within the lineage.")
    session_id: str | None = Field(
        default=None,
        max_length=NAME_CHARS,
        description=("The working session this gate belongs to (health trends group by it; without one, by day)."),
    )
    deadline_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DEADLINE_SECONDS,
        description=(
            "Seconds until the gate stops waiting and ends timed_out with the proxy's guess "
            "(null: the worker's VICAR_GATE_DEADLINE_SECONDS)."
        ),
    )

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str) -> str:
        return check_principal(v)

    @field_validator("gate_id")
    @classmethod
    def _gate_id(cls, v: str) -> str:
        if not GATE_ID_RE.match(v or ""):
            raise ValueError(f"invalid gate_id {v!r}: 1-200 characters of letters, digits and . _ : @ / -")
        return v

    @field_validator("task_type")
    @classmethod
    def _task_type(cls, v: str) -> str:
        return v.lower()

    @property
    def valid_actions(self) -> tuple[Action, ...]:
        return QUESTION_ACTIONS if self.kind is RequestKind.question else VALID_ACTIONS[self.state]


class HumanAnswer(BaseModel):
    """The human's answer to an escalated gate. `action` stays a string here so the
    update validator, not the payload converter, refuses a bad one with a clear message."""

    # The schema says what the gate's validator requires (responder; text for a dialog turn).
    model_config = ConfigDict(extra="forbid", json_schema_extra=answer_rules(["responder"], [Action.dialog.value]))

    action: str = Field(
        max_length=NAME_CHARS,
        json_schema_extra={"enum": [a.value for a in Action]},
        description=("approve, correct, reject, hold, withdraw or dialog at a gate; answer to an agent's question."),
    )
    text: str = Field(
        default="",
        max_length=DEFAULT_LIMITS.answer_text,
        description="The human's words: the correction, the reason, the question for the agent.",
    )
    # Who answers. None only so the gate's validator, not the converter, says it is missing.
    responder: str | None = Field(
        default=None,
        max_length=NAME_CHARS,
        description=("Who answers, checked against the principal's allow-list."),
        json_schema_extra=required_string(RESPONDER_PATTERN, RESPONDER_MAX_CHARS),
    )

    ask_first: bool = Field(
        default=False,
        description='"… but ask me first": the person wants to be asked about gates of this kind from now on.',
    )

    @field_validator("responder")
    @classmethod
    def _responder(cls, v: str | None) -> str | None:
        return None if v is None or not v.strip() else check_responder(v)


class ChunkSummary(BaseModel):
    """A retrieved memory as the predictor sees it (no vectors)."""

    chunk_id: str
    kind: str = "gate"  # a gate episode, a question, or a fact: "preference", "procedure"
    state: str
    task_type: str
    outcome: str
    answered_by: AnsweredBy
    question: str = ""
    artifact_excerpt: str = ""
    human_response: str = ""
    upstream_agent: str | None = None
    created_n: int = 0
    gate_id: str = ""  # the gate the chunk records; "" for a fact or an old chunk
    activation: float
    similarity: float | None
    score: float
    confidence: float | None = None  # a fact's confidence; None for an episode


class DialogTurn(BaseModel):
    """One exchange line of a gate's dialog: the reviewer side (the proxy or the human)
    or the agent side (generated to answer the reviewer)."""

    speaker: str = Field(description='"reviewer" (the human or the proxy) or "agent".')
    text: str
    answered_by: AnsweredBy | None = Field(None, description="For reviewer lines: who spoke for the human.")
    responder: str | None = Field(None, description="For the human's lines: who asked.")


class LineageVerdict(BaseModel):
    """One of the principal's latest human verdicts on the artifact's own lineage (its
    topic branch, its patch's earlier versions), found by exact match, not similarity."""

    chunk_id: str
    action: str
    response: str = ""  # the human's words, clipped
    n: int
    gate_id: str = ""
    ago: int  # interactions ago: N - n
    revision: str = ""
    changed_since: bool | None = None  # the artifact differs from this gate's; None: unknown


class RetrievalContext(BaseModel):
    principal: str
    n: int
    phase: str  # "prior" or "posterior"
    chunks: list[ChunkSummary] = Field(default_factory=list)
    memory_size: int = 0
    memory_depth: int = 0  # distinct (state, task_type) pairs with a human answer
    # The session's working-memory block: the cacheable prompt prefix, identical for
    # every pass and gate of a session. Gate-specific `chunks` go after it.
    working_memory: str = ""
    # The latest human verdicts on this artifact's lineage, most recent first; kept
    # apart from `chunks` (and not ranked with them).
    lineage_history: list[LineageVerdict] = Field(default_factory=list)
    # The person's answers on the most similar past artifacts, whatever their state or task
    # type (the posterior only): more of their own sentences for the pre-review to rank.
    similar_work: list[ChunkSummary] = Field(default_factory=list)
    # Censors that fire on this artifact (the posterior only: they judge the artifact).
    censors: list[CensorHit] = Field(default_factory=list)
    # The trust score of the gate's upstream agent (vicar.proxy.trust); None: none named.
    agent_trust: float | None = None
    untrusted: bool = False  # below the trust floor: probed, never answered alone


class PassResult(BaseModel):
    prose: str  # the predicted reply in the human's voice; empty when there is no prediction
    note: str = ""  # the proxy's own remark (why it has no prediction), never an answer
    confidence: float = Field(ge=0.0, le=1.0)
    action: Action | None = None  # the predicted action, when the predictor states one
    tap: Action | None = None  # the likeliest answer that needs no words: the one-tap button's
    used_chunk_ids: list[str] = Field(default_factory=list)
    usage: Usage | None = None  # LLM predictors: tokens and cost of this pass
    # The learned predictor's inputs that the outcome log cannot rebuild (the memory
    # vote at the time), kept so a refit from the log sees what the gate saw.
    features: dict[str, float] = Field(default_factory=dict)
    prereview: list[PreReviewItem] = Field(default_factory=list)  # the person's own words this pass was shown
    unsupported: list[str] = Field(default_factory=list)  # concerns the LLM raised that no item supports
    # P(the person wants to be asked | they give `action`): learned from their "… but ask me
    # first" answers (vicar.proxy.team); None where the predictor does not learn it.
    wants_asked: float | None = Field(None, ge=0.0, le=1.0)


class Surprise(BaseModel):
    magnitude: float
    description: str
    percepts: list[str] = Field(default_factory=list)
    usage: Usage | None = None


class ModelPin(BaseModel):
    """The learned model a gate decides with, fixed under its turn: the saved version
    (None: no fit yet, the memory vote answers), how many human answers its history
    held and the outcome log's last seq in it. A retry of the gate's consult uses the
    same pin."""

    version: int | None = None
    answers: int = 0
    seq: int = 0


class OutcomeRecord(BaseModel):
    """Everything record_outcome needs to store one gate as a memory chunk."""

    request: GateRequest
    n: int
    workflow_id: str
    action: Action
    response_text: str
    answered_by: AnsweredBy
    responder: str | None = None
    # The Temporal client identity the answer came with (docs/identity.md): None for the
    # proxy, and for answers recorded before it was kept.
    responder_identity: str | None = None
    prior: PassResult | None = None
    posterior: PassResult | None = None
    surprise: Surprise | None = None
    at: datetime | None = None  # workflow time of the answer (None in a clockless replay)
    dialog: list[DialogTurn] = Field(default_factory=list)
    calibration: Calibration | None = None
    # For the audit trail (docs/audit.md), workflow times; None in records kept before them.
    started_at: datetime | None = None
    escalated_at: datetime | None = None
    cancelled: bool = False  # nobody answered: the gate was cancelled (else its deadline passed)
    ask_first: bool = False  # the person answered "… but ask me first": they want to be asked on this kind


class GateResult(BaseModel):
    """What the gate returns to the orchestrator: the decision, who made it, and why."""

    gate_id: str
    principal: str
    state: CfAState
    task_type: str
    action: Action = Field(description="The decision: what the agent team does next.")
    text: str = Field(description="The human's words, or the proxy's answer in the human's voice.")
    confidence: float = Field(description="The proxy's calibrated confidence in its own answer.")
    prior_confidence: float = Field(description="The proxy's confidence before it read the artifact.")
    calibration_guard: str = Field(description="Why the proxy answered or escalated (the guard that decided).")
    escalated: bool = Field(description="True if the gate went to the human.")
    answered_by: AnsweredBy
    responder: str | None = Field(None, description="Who answered, for a human answer.")
    responder_identity: str | None = Field(
        None, description=("The Temporal client identity the human answer came with (docs/identity.md).")
    )
    n: int = Field(description="The gate's place in the principal's sequence of interactions (1, 2, ...).")
    surprise: Surprise | None = None
    calibration_note: str = ""
    dialog: list[DialogTurn] = Field(default_factory=list, description="Questions and replies before the decision.")
    usage: Usage = Field(default_factory=Usage, description="The gate's LLM tokens and cost in total.")
    # The autonomy rule when the proxy was consulted (Calibration's numbers).
    autonomy_threshold: float | None = None
    autonomy_bound: float | None = None
    autonomy_evidence: int = 0
    model_version: int | None = Field(None, description="The learned model's version, when one decided.")
    timed_out: bool = Field(
        False, description="The deadline passed with no answer: hold, by nobody, the proxy's guess in proxy_action."
    )
    proxy_action: Action | None = None
    prereview: list[PreReviewItem] = Field(
        default_factory=list,
        description="The person's own past concerns and questions for this artifact, with sources.",
    )
    unsupported: list[str] = Field(
        default_factory=list, description="Concerns the proxy's LLM raised that no pre-review item supports."
    )


class GateDetails(BaseModel):
    """What a gate shows while it runs (query), e.g. for `vicar escalations`."""

    gate_id: str
    principal: str
    state: CfAState
    task_type: str
    status: GateStatus = Field(description="Where the gate is: queued, consulting, escalated (waits for a human)...")
    question: str
    escalation_mode: EscalationMode | None = Field(None, description="The request's: a listing's reasons need it.")
    workflow_id: str = Field(
        "",
        description=(
            "The id the gate's workflow was started under: what answering it uses (usually vicar-gate/<gate_id>)."
        ),
    )
    escalated_at: datetime | None = Field(None, description="When it went to the human (workflow time).")
    n: int | None = Field(None, description="The gate's place in the principal's sequence, once it has one.")
    proxy_action: Action | None = Field(None, description="The proxy's guess at the human's action.")
    proxy_tap: Action | None = Field(None, description="The likeliest answer that needs no words (one tap).")
    proxy_text: str = Field("", description="The proxy's guess at the human's words.")
    proxy_confidence: float | None = None
    calibration_guard: str = Field("", description="Why the gate escalated.")
    calibration_note: str = ""
    autonomy_threshold: float | None = Field(None, description="The confidence needed to answer alone, as shown.")
    autonomy_target: float | None = Field(None, description="The error the autonomy rule holds the proxy to.")
    proxy_supported: bool | None = Field(
        None, description="Whether the person's own answers of this kind of action back the proxy's guess."
    )
    proxy_support_label: str = Field(
        "", description="Where the person's answers do not back the guess, what is shown instead of a percentage."
    )
    dialog: list[DialogTurn] = Field(default_factory=list, description="Questions and replies so far.")
    prereview: list[PreReviewItem] = Field(
        default_factory=list,
        description="The person's own past concerns and questions for this artifact, with sources.",
    )
    unsupported: list[str] = Field(
        default_factory=list, description="Concerns the proxy's LLM raised that no pre-review item supports."
    )
    artifact_excerpt: str = Field("", description="The artifact's first line (at most 120 characters).")
    upstream_agent: str | None = Field(None, description="The agent that produced the artifact.")
    deadline: datetime | None = Field(None, description="When the gate stops waiting for the human.")
    lineage_verdicts: list[LineageVerdict] = Field(
        default_factory=list, description="The person's latest verdicts on this artifact's lineage, latest first."
    )
