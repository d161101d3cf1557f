"""Runtime settings: where data lives, which Temporal to use, memory parameters.

Everything comes from the environment with defaults that work on a fresh machine. The
variables are declared in vicar/settings_env.py (the only module that reads them);
`Settings.from_env` validates them all at start. docs/configuration.md is generated
from both: `python -m vicar.config_doc`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vicar import settings_env as env
from vicar.errors import InvalidInput
from vicar.memory.params import EMBEDDERS, EmbedderParams, MemoryParams
from vicar.models.limits import DEFAULT_LIMITS, TextLimits
from vicar.models.session import SessionConfig
from vicar.runtime.sharding import parse_count, parse_shards

TASK_QUEUE = "vicar"
# A week: a gate nobody answers ends (timed_out, with the proxy's guess) rather than
# holding an orchestrator for ever. VICAR_GATE_DEADLINE_SECONDS, or the request's own.
DEFAULT_GATE_DEADLINE_SECONDS = 7 * 24 * 3600.0
ANSWER_TIMEOUT = 30.0  # seconds a gate has to take a human answer before the caller is told why not

# The environment variables that lower Vicar's text limits (vicar.models.limits.TextLimits).
LIMIT_VARS: dict[str, str] = env.fields_under("limits")
PREDICTORS = ("learned", "offline", "anthropic", "openai")  # VICAR_PREDICTOR's choices


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
    # error and lowered the bound's coverage (bench/TRUST_FEATURE_RESULTS.md).
    trust_feature: bool = False


class AutonomyParams(BaseModel):
    """The autonomy rule: the proxy answers alone only where its error is bounded.

    Over all the (score, right?) pairs of the principal's human-answered gates, a bet
    per score threshold against "error >= target_error", tested from the highest
    threshold down (docs/autonomy-bound.md): the error bound holds at confidence
    1 - delta whenever it is read; a share `audit_share` of the gates the rule would
    answer alone still go to the human, so evidence keeps coming where the proxy acts,
    and a context whose audits show the error above target loses autonomy until the
    rule re-earns it. With no error, 100 answers prove 5% at delta 0.05. `window` is no
    longer read by the rule (the bet runs over every pair). Overridable per principal
    and per state in `autonomy.json` beside the memory (vicar.proxy.autonomy.rule).
    """

    model_config = ConfigDict(extra="forbid")

    target_error: float = Field(0.05, gt=0.0, le=1.0)
    delta: float = Field(0.05, gt=0.0, lt=1.0)
    window: int = Field(2000, ge=1, le=100_000)
    audit_share: float = Field(0.05, ge=0.0, le=1.0)
    # ipw: every gate above a threshold is a draw, an audit's label weighs the inverse of
    # its probability (docs/autonomy-bound.md); labelled: the labelled pairs alone, unweighted.
    weighting: Literal["ipw", "labelled"] = "ipw"


# VICAR_AUTONOMY_* environment defaults, by AutonomyParams field.
AUTONOMY_VARS: dict[str, str] = env.fields_under("calibration.autonomy")
# The memory kinds and the trust ledger's switches and main knobs, by (Settings section,
# field); docs/design-decisions.md, "Which mechanisms are on".
MECHANISM_VARS: dict[str, tuple[str, str]] = {
    v.name: cast(tuple[str, str], tuple(v.field.split(".")))
    for v in env.VARS
    if v.section == env.MECHANISMS and v.field
}


class CalibrationParams(BaseModel):
    """The calibration guards (docs/design/approval-gate-and-proxy.md) and the autonomy rule."""

    # Cold-start: cap while fewer distinct (state, task_type) pairs have a human
    # answer. The design ships 0 (off).
    memory_depth_threshold: int = 0
    staleness_days: float = 7.0
    cap: float = 0.5  # what the memory guards (cold start, tension, staleness) cap the confidence at
    # The confidence shown is the score recalibrated on the latest this many human-graded
    # pairs (vicar.proxy.recalibration; 0: shown as the predictor gives it).
    recalibration_window: int = Field(2000, ge=0, le=100_000)
    autonomy: AutonomyParams = Field(default_factory=AutonomyParams)
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


# The worker's operational surface (vicar/runtime/ops.py), by OpsParams field.
OPS_VARS: dict[str, str] = env.fields_under("ops")
MAX_SHUTDOWN_GRACE_SECONDS = 3600.0


class OpsParams(BaseModel):
    """The worker's HTTP surface and shutdown (vicar/runtime/ops.py).

    Both listeners are off unless an address is given: a laptop running `vicar worker`
    next to a demo opens no port and cannot collide on one; the container image and the
    manifests turn them on. Addresses are IP:PORT (the SDK's Prometheus exporter takes no
    host names), e.g. 0.0.0.0:8080 in a pod, 127.0.0.1:8080 on a shared host.
    """

    model_config = ConfigDict(extra="forbid")

    address: str | None = None  # /healthz and /readyz
    metrics_address: str | None = None  # the SDK runtime's Prometheus exporter: /metrics
    # Running activities get this long to finish after SIGTERM before the SDK cancels
    # them (the SDK's default is 0: cancelled at once). Keep the orchestrator's kill
    # timeout above it (terminationGracePeriodSeconds, TimeoutStopSec, stop_grace_period).
    shutdown_grace_seconds: float = Field(30.0, ge=0.0, le=MAX_SHUTDOWN_GRACE_SECONDS)


def ip_port(var: str, raw: str) -> str:
    """IP:PORT or [IPv6]:PORT, port 1-65535; anything else is one line naming the variable."""
    import ipaddress

    host, sep, port = raw.strip().rpartition(":")
    try:
        ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
        ok = bool(sep) and port.isdigit() and 1 <= int(port) <= 65535
    except ValueError:
        ok = False
    if not ok:
        raise InvalidInput(f"{var} must be IP:PORT (e.g. 0.0.0.0:8080 or 127.0.0.1:9464), not {raw!r}")
    return raw.strip()


def ops_from_env() -> OpsParams:
    ops = OpsParams()
    for attr in ("address", "metrics_address"):
        raw = env.text(OPS_VARS[attr])
        if raw and raw.lower() not in ("off", "0"):
            setattr(ops, attr, ip_port(OPS_VARS[attr], raw))
    var = OPS_VARS["shutdown_grace_seconds"]
    grace_raw = env.raw(var)
    if grace_raw is not None:
        try:
            grace = float(grace_raw)
        except ValueError:
            grace = -1.0
        if not 0.0 <= grace <= MAX_SHUTDOWN_GRACE_SECONDS:  # NaN fails too
            raise InvalidInput(
                f"{var} must be a number of seconds from 0 to {MAX_SHUTDOWN_GRACE_SECONDS:g}, not {grace_raw!r}"
            )
        ops.shutdown_grace_seconds = grace
    return ops


def webhook_from_env() -> str | None:
    """VICAR_WEBHOOK_URL: an http(s) URL, refused in one line otherwise."""
    from urllib.parse import urlsplit

    raw = env.text("VICAR_WEBHOOK_URL")
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # Its query may hold a token: the refusal names only the scheme.
        raise InvalidInput(
            f"VICAR_WEBHOOK_URL must be an http(s) URL with a host, not a {parts.scheme or 'schemeless'!r} "
            "URL (the value is not shown: it may hold a token)"
        )
    return raw


def inbox_url_from_env() -> str | None:
    """VICAR_INBOX_URL: an http(s) URL with a host, without its trailing slash."""
    from urllib.parse import urlsplit

    raw = env.text("VICAR_INBOX_URL")
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"VICAR_INBOX_URL must be an http(s) URL with a host, not {raw!r}")
    return raw.rstrip("/")


class LLMEnv(BaseModel):
    """The LLM predictor's models ("": the provider's default) and request timeout."""

    model: str = ""
    classifier_model: str = ""
    timeout_s: float = 120.0


def llm_from_env() -> LLMEnv:
    return LLMEnv(
        model=env.text("VICAR_LLM_MODEL"),
        classifier_model=env.text("VICAR_LLM_CLASSIFIER_MODEL"),
        timeout_s=env.llm_timeout(),
    )


def embedder_from_env() -> EmbedderParams:
    name = env.text("VICAR_EMBEDDER").lower() or EmbedderParams().name
    if name not in EMBEDDERS:
        raise InvalidInput(f"unknown VICAR_EMBEDDER {name!r}; available: {', '.join(EMBEDDERS)}")
    raw_threads = env.text("VICAR_EMBED_THREADS") or "1"
    try:
        threads = max(1, int(raw_threads))
    except ValueError:
        raise InvalidInput(f"VICAR_EMBED_THREADS must be a whole number, not {raw_threads!r}") from None
    return EmbedderParams(
        name=name,
        threads=threads,
        openai_model=env.text("VICAR_OPENAI_EMBEDDING_MODEL") or EmbedderParams().openai_model,
    )


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


class Settings(BaseModel):
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".vicar")
    task_queue: str = TASK_QUEUE
    memory: MemoryParams = Field(default_factory=MemoryParams)
    predictor: PredictorParams = Field(default_factory=PredictorParams)
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    calibration: CalibrationParams = Field(default_factory=CalibrationParams)
    facts: FactParams = Field(default_factory=FactParams)
    # Reviewer turns the proxy may take in one gate's dialog before the human decides.
    max_dialog_turns: int = 5
    session: SessionConfig = Field(default_factory=SessionConfig)
    # Directories under which artifact paths may be read; none: every path is refused.
    artifact_roots: list[Path] = Field(default_factory=list)
    limits: TextLimits = Field(default_factory=TextLimits)
    # Sharded memory (vicar.runtime.sharding): None runs unsharded, one worker doing everything.
    shard_count: int | None = None
    shards: str = "all"  # which shards this worker serves (--shards)
    # A gate waits this long for its shard's owner to take work, then the human decides.
    shard_wait_seconds: float = 60.0
    # A gate's deadline when its request sets none (seconds from its start; 0: none).
    gate_deadline_seconds: float = DEFAULT_GATE_DEADLINE_SECONDS
    # Escalations and deadlines are POSTed here as JSON (None: nobody is told).
    webhook_url: str | None = None
    webhook_kind: Literal["vicar", "slack"] = "vicar"  # the Notice JSON, or a chat message
    inbox_url: str | None = None  # where a chat message links a gate's page (None: no link)
    ops: OpsParams = Field(default_factory=OpsParams)
    # VICAR_REQUIRE_IDENTITY_MATCH: refuse a human answer whose Temporal client identity
    # is not its responder's name (docs/identity.md says when that identity is trusted).
    require_identity_match: bool = False
    embedder: EmbedderParams = Field(default_factory=EmbedderParams)

    @model_validator(mode="after")
    def _blended_vectors_follow_retrieval(self) -> "Settings":
        wanted = self.retrieval.embedding == "blended"
        if self.memory.blended_vectors != wanted:
            self.memory = self.memory.model_copy(update={"blended_vectors": wanted})
        return self

    @classmethod
    def from_env(cls) -> "Settings":
        data_dir = env.raw("VICAR_DATA_DIR")
        settings = cls(
            data_dir=Path(data_dir).expanduser() if data_dir else Path.home() / ".vicar",
            task_queue=env.raw("VICAR_TASK_QUEUE") or TASK_QUEUE,
        )
        for var, target, attr in (
            *((var, settings.calibration.autonomy, attr) for attr, var in AUTONOMY_VARS.items()),
            ("VICAR_SESSION_IDLE_SECONDS", settings.session, "idle_timeout_seconds"),
            ("VICAR_SESSION_TOKEN_BUDGET", settings.session, "token_budget"),
            ("VICAR_SHARD_WAIT_SECONDS", settings, "shard_wait_seconds"),
            ("VICAR_GATE_DEADLINE_SECONDS", settings, "gate_deadline_seconds"),
        ):
            raw = env.raw(var)
            if raw is None:
                continue
            if isinstance(getattr(target, attr), str):  # a choice (the rule's weighting): the model says which
                try:
                    setattr(target, attr, getattr(type(target).model_validate({attr: raw.strip()}), attr))
                except ValidationError as exc:
                    raise InvalidInput(f"{var}: {exc.errors()[0]['msg']}, not {raw!r}") from None
                continue
            try:
                value = float(raw)
            except ValueError:
                raise InvalidInput(f"{var} must be a number, not {raw!r}") from None
            if value < 0:
                raise InvalidInput(f"{var} must not be negative, not {raw!r}")
            if isinstance(target, AutonomyParams):
                # Validated like the file's values (a share above 1, a window of 0.5: refused).
                try:
                    value = getattr(AutonomyParams.model_validate({attr: value}), attr)
                except ValidationError as exc:
                    raise InvalidInput(f"{var}: {exc.errors()[0]['msg']}, not {raw!r}") from None
            setattr(target, attr, type(getattr(target, attr))(value))
        for var, (section, attr) in MECHANISM_VARS.items():
            raw = env.raw(var)
            if raw is None:
                continue
            model = getattr(settings, section)
            try:
                # Validated by the section's own model: its types and bounds.
                setattr(settings, section, type(model).model_validate({**model.model_dump(), attr: raw.strip()}))
            except ValidationError as exc:
                raise InvalidInput(f"{var}: {exc.errors()[0]['msg']}, not {raw!r}") from None
        for attr, var in LIMIT_VARS.items():
            raw = env.raw(var)
            if raw is None:
                continue
            # Lower only: the models' own limits (the defaults) bind inside the workflow.
            ceiling = getattr(DEFAULT_LIMITS, attr)
            if not raw.strip().isdigit() or not 1 <= int(raw) <= ceiling:
                raise InvalidInput(f"{var} must be a whole number from 1 to {ceiling}, not {raw!r}")
            setattr(settings.limits, attr, int(raw))
        settings.shard_count = parse_count(env.raw("VICAR_SHARD_COUNT"))
        settings.shards = env.raw("VICAR_SHARDS") or "all"
        settings.ops = ops_from_env()
        settings.webhook_url = webhook_from_env()
        kind = env.text("VICAR_WEBHOOK_KIND").lower() or "vicar"
        if kind not in ("vicar", "slack"):
            raise InvalidInput(f"VICAR_WEBHOOK_KIND must be vicar or slack, not {kind!r}")
        settings.webhook_kind = "slack" if kind == "slack" else "vicar"
        settings.inbox_url = inbox_url_from_env()
        match = env.text("VICAR_REQUIRE_IDENTITY_MATCH").lower()
        if match not in ("", "0", "1", "false", "true", "no", "yes"):
            raise InvalidInput(f"VICAR_REQUIRE_IDENTITY_MATCH must be 1 or 0, not {match!r}")
        settings.require_identity_match = match in ("1", "true", "yes")
        roots = env.raw("VICAR_ARTIFACT_ROOTS") or ""
        settings.artifact_roots = [
            Path(os.path.expanduser(r.strip())).absolute() for r in roots.split(os.pathsep) if r.strip()
        ]
        settings.embedder = embedder_from_env()
        # Read where they are used (vicar.proxy.select, vicar.llm.settings); checked here
        # so a bad value stops the start, not the first gate.
        env.predictor()
        llm_from_env()
        return settings

    def check_texts(self, **texts: str | None) -> None:
        """Refuse a text longer than its configured limit (a TextLimits field name), in one line."""
        for name, text in texts.items():
            limit = getattr(self.limits, name)
            if text and len(text) > limit:
                raise InvalidInput(
                    f"{name} has {len(text)} characters, more than the limit of {limit} ({LIMIT_VARS[name]})"
                )

    def served_shards(self) -> list[int]:
        """The shards this worker serves ([] unsharded)."""
        return parse_shards(self.shards, self.shard_count) if self.shard_count else []

    @property
    def principals_dir(self) -> Path:
        return self.data_dir / "principals"

    @property
    def embedding_cache(self) -> Path:
        return self.data_dir / "cache" / "embeddings.sqlite"

    @property
    def temporal_db(self) -> Path:
        return self.data_dir / "temporal" / "temporal.db"
