"""The sections of Settings: each a model of one concern, with its defaults and bounds.

The memory's own parameters (vicar.memory.params) and the session's (vicar.models.session)
are defined where they are used; the bounds a variable must respect are added here.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from vicar.models.limits import DEFAULT_LIMITS, TextLimits
from vicar.models.session import SessionConfig

PREDICTORS = ("learned", "offline", "anthropic", "openai")  # VICAR_PREDICTOR's choices
MAX_SHUTDOWN_GRACE_SECONDS = 3600.0


class RetrievalOptions(BaseModel):
    """How the consult path retrieves: the ablations of the design, selectable per run."""

    mode: Literal["composite", "activation", "similarity", "recency"] = "composite"
    embedding: Literal["multi", "blended"] = "multi"
    lexical: bool = False
    # The latest human verdicts on the artifact's lineage shown beside the retrieved
    # memories (0 turns them off: an ablation).
    lineage_history: int = Field(default=3, ge=0, le=20)


class PredictorParams(BaseModel):
    """Offline predictor: evidence needed before it is confident.

    depth = 1 - exp(-evidence / evidence_scale); with scale 1.5 three strong,
    agreeing human answers give ~0.86, two give ~0.74.
    """

    evidence_scale: float = 1.5
    # Similarity below this says a memory is about something else: no evidence.
    min_similarity: float = 0.35
    # The learned model reads the upstream agent's trust score (agent_trust: the one
    # place regret reaches it). Off: over five replay seeds it raised the autonomous
    # error and lowered the bound's coverage (bench/TRUST_FEATURE_RESULTS.md). A replay
    # switches it (vicar/eval/profile.py).
    trust_feature: bool = False


class AutonomyParams(BaseModel):
    """The autonomy rule: the proxy answers alone only where its error is bounded.

    Over all the (score, right?) pairs of the principal's human-answered gates, a bet
    per score threshold against "error >= target_error", tested from the highest
    threshold down (docs/autonomy-bound.md): the error bound holds at confidence
    1 - delta whenever it is read; a share `audit_share` of the gates the rule would
    answer alone still go to the human, so evidence keeps coming where the proxy acts,
    and a context whose audits show the error above target loses autonomy until the
    rule re-earns it. With no error, 100 answers prove 5% at delta 0.05. Overridable per
    principal and per state in `autonomy.json` beside the memory (vicar.proxy.autonomy.rule).
    """

    model_config = ConfigDict(extra="forbid")

    target_error: float = Field(0.05, gt=0.0, le=1.0)
    delta: float = Field(0.05, gt=0.0, lt=1.0)
    audit_share: float = Field(0.05, ge=0.0, le=1.0)
    # ipw: every gate above a threshold is a draw, an audit's label weighs the inverse of
    # its probability (docs/autonomy-bound.md); labelled: the labelled pairs alone, unweighted.
    weighting: Literal["ipw", "labelled"] = "ipw"


class CalibrationParams(BaseModel):
    """The calibration guards (docs/design/approval-gate-and-proxy.md) and the autonomy rule.

    The trust ledger's and the censors' knobs are the shipped values; the replay switches
    them (vicar/eval/profile.py; docs/design-decisions.md, "Which mechanisms are on")."""

    # Cold-start: cap while fewer distinct (state, task_type) pairs have a human
    # answer. The design ships 0 (off).
    memory_depth_threshold: int = 0
    staleness_days: float = 7.0
    cap: float = 0.5  # what the memory guards (cold start, tension, staleness) cap the confidence at
    # The confidence shown is the score recalibrated on the latest this many human-graded
    # pairs (vicar.proxy.recalibration; 0: shown as the predictor gives it).
    recalibration_window: int = Field(2000, ge=0, le=100_000)
    autonomy: AutonomyParams = Field(default_factory=AutonomyParams)
    # Support (vicar.proxy.support): a gate is answered alone only where this many of the
    # person's own answers of its kind of action, this close to it (cosine of the
    # artifacts), among the latest (or nearest) `support_look` of the kind, all give the
    # proposed answer. 0: off (the pooled bound alone decides, as before).
    support_answers: int = Field(3, ge=0, le=100)
    support_similarity: float = Field(0.5, ge=-1.0, le=1.0)
    support_look: int = Field(8, ge=1, le=100)
    # Genuine tension: two retrieved human answers that disagree, both this relevant
    # (composite similarity) and close in time (interactions apart).
    tension_similarity: float = 0.8
    tension_window: int = 50
    # Probation (docs/design/agent-trust-memory.md): a gate naming an upstream agent is never
    # answered alone until the human has answered this many of that agent's artifacts.
    # 0: off. Chosen by the replay sweep (docs/how-it-works.md, "Probation").
    probation_answers: int = Field(3, ge=0, le=1000)
    # An upstream agent whose trust score (vicar.proxy.trust) is below this is never
    # answered alone, and the LLM probes its artifacts as at an intent gate. 0: off.
    trust_floor: float = Field(0.3, ge=0.0, le=1.0)
    # Regret: a human correction or rejection finds the proxy's approvals on the same
    # lineage this many interactions back (docs/design/agent-trust-memory.md keeps 90 days;
    # interactions are the memory's clock; 100 when on). 0: off, the default: in the
    # replay it found 3 regrets in 17,015 gates, 1 of them wrong, and the autonomous
    # error was higher with it (docs/design-decisions.md, "Which mechanisms are on").
    regret_window: int = Field(0, ge=0, le=100_000)
    # "lineage": any later revision of the thread reversed counts; "revision": only the
    # same revision (the artifact the proxy approved, not its successor).
    regret_scope: Literal["lineage", "revision"] = "lineage"
    # Censors (docs/design/memory-types.md): learned once the human has corrected or rejected this many
    # artifacts of one context this alike (mean cosine over artifact and agent message);
    # each approval of a censored gate multiplies its severity by the factor (block at
    # >= 0.75, warn at >= 0.3, deactivated below). censor_min 0: off, the default: in the
    # replay no censor changed a decision (3 when on; docs/design-decisions.md, "Which mechanisms are on").
    censor_min: int = Field(0, ge=0, le=1000)
    censor_similarity: float = Field(0.75, gt=0.0, le=1.0)
    censor_fp_factor: float = Field(0.5, gt=0.0, lt=1.0)


class FactParams(BaseModel):
    """Semantic facts (docs/design/memory-types.md): the human's preferences, learned from the
    concerns they repeat when they turn work back, with Hindsight's asymmetric
    confidence. docs/how-it-works.md, "The human's facts"."""

    preferences: bool = True
    procedures: bool = True
    # A concern word in this many of a context's latest questions of the human's makes
    # the latest such question a procedure (a check they keep running).
    procedure_min: int = Field(3, ge=1, le=1000)
    # A concern word said in this many of a context's corrections and rejections (and
    # said more when turning work back than when approving) becomes a preference.
    preference_min: int = Field(3, ge=1, le=1000)
    lookback: int = Field(100, ge=1, le=10_000)  # latest human answers per context read at extraction
    per_context: int = Field(5, ge=1, le=100)  # most live preferences per context
    initial_confidence: float = Field(0.5, gt=0.0, lt=1.0)
    alpha: float = Field(0.1, gt=0.0, lt=1.0)  # a confirmation: c += alpha * (1 - c)
    # Hindsight: a disconfirmation moves further, c -= factor * alpha * c (1: symmetric).
    # The replay sweep (bench/HINDSIGHT_RESULTS.md) chose 1: at 2 and 4 macro-F1 fell
    # (0.420, 0.411, 0.407) and the autonomous error did not (0.033, 0.033, 0.036).
    hindsight_factor: float = Field(1.0, ge=1.0, le=9.0)
    confirm_at: float = Field(0.7, gt=0.0, lt=1.0)  # learned -> confirmed
    deactivate_at: float = Field(0.2, ge=0.0, lt=1.0)  # below: deactivated


def ip_port(value: str) -> str:
    """IP:PORT or [IPv6]:PORT, port 1-65535 (the SDK's Prometheus exporter takes no host names)."""
    host, sep, port = value.strip().rpartition(":")
    try:
        ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
        ok = bool(sep) and port.isdigit() and 1 <= int(port) <= 65535
    except ValueError:
        ok = False
    if not ok:
        raise PydanticCustomError("ip_port", "must be IP:PORT (e.g. 0.0.0.0:8080 or 127.0.0.1:9464)")
    return value.strip()


class ServerPorts(BaseModel):
    """The embedded Temporal dev server's ports on 127.0.0.1 (vicar/runtime/server.py), so
    two Vicars with their own data directories can share a machine. None: the gRPC port
    7233 and the UI's 8233, each or a free one when taken; the HTTP API and /metrics on
    free ones (the server opens all four). A port given is that port, or a refusal in one
    line when it is taken: never a silent move to another."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(None, ge=1, le=65535)  # the frontend's gRPC: what clients and workers dial
    ui_port: int | None = Field(None, ge=1, le=65535)  # the Temporal web UI
    http_port: int | None = Field(None, ge=1, le=65535)  # the HTTP API
    metrics_port: int | None = Field(None, ge=1, le=65535)  # the server's Prometheus /metrics


class OpsParams(BaseModel):
    """The worker's HTTP surface and shutdown (vicar/runtime/ops.py).

    Both listeners are off unless an address is given: a laptop running `vicar worker`
    next to a demo opens no port and cannot collide on one; the container image and the
    manifests turn them on. Addresses are IP:PORT, e.g. 0.0.0.0:8080 in a pod,
    127.0.0.1:8080 on a shared host.
    """

    model_config = ConfigDict(extra="forbid")

    address: str | None = None  # /healthz and /readyz
    metrics_address: str | None = None  # the SDK runtime's Prometheus exporter: /metrics
    # Running activities get this long to finish after SIGTERM before the SDK cancels
    # them (the SDK's default is 0: cancelled at once). Keep the orchestrator's kill
    # timeout above it (terminationGracePeriodSeconds, TimeoutStopSec, stop_grace_period).
    shutdown_grace_seconds: float = Field(30.0, ge=0.0, le=MAX_SHUTDOWN_GRACE_SECONDS, allow_inf_nan=False)

    @field_validator("address", "metrics_address")
    @classmethod
    def _ip_port(cls, value: str | None) -> str | None:
        return None if value is None else ip_port(value)


class LLMParams(BaseModel):
    """The LLM predictor's models ("": the provider's default, vicar/llm/choice.py) and
    how long one request may take."""

    model: str = ""
    classifier_model: str = ""
    timeout_s: float = Field(120.0, gt=0.0, allow_inf_nan=False)


class SessionParams(SessionConfig):
    """The session's settings (vicar.models.session.SessionConfig, which the workflow
    carries), with the bounds their variables must respect."""

    idle_timeout_seconds: float = Field(SessionConfig().idle_timeout_seconds, ge=0.0, allow_inf_nan=False)
    token_budget: int = Field(SessionConfig().token_budget, ge=0)


class LimitParams(TextLimits):
    """The text limits (vicar.models.limits.TextLimits): lower only, since the models'
    own limits (the defaults) bind inside the workflow, which reads no settings."""

    question: int = Field(DEFAULT_LIMITS.question, ge=1, le=DEFAULT_LIMITS.question)
    actor_message: int = Field(DEFAULT_LIMITS.actor_message, ge=1, le=DEFAULT_LIMITS.actor_message)
    artifact_text: int = Field(DEFAULT_LIMITS.artifact_text, ge=1, le=DEFAULT_LIMITS.artifact_text)
    answer_text: int = Field(DEFAULT_LIMITS.answer_text, ge=1, le=DEFAULT_LIMITS.answer_text)
    artifact_file_bytes: int = Field(DEFAULT_LIMITS.artifact_file_bytes, ge=1, le=DEFAULT_LIMITS.artifact_file_bytes)
