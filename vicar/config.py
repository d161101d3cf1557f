"""Runtime settings: where data lives, which Temporal to use, memory parameters.

Everything comes from the environment with defaults that work on a fresh machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vicar.errors import InvalidInput
from vicar.models import DEFAULT_LIMITS, SessionConfig, TextLimits

TASK_QUEUE = "vicar"
ANSWER_TIMEOUT = 30.0  # seconds a gate has to take a human answer before the caller is told why not

# The environment variables that lower Vicar's text limits (vicar.models.TextLimits).
LIMIT_VARS: dict[str, str] = {
    "question": "VICAR_MAX_QUESTION_CHARS",
    "actor_message": "VICAR_MAX_MESSAGE_CHARS",
    "artifact_text": "VICAR_MAX_ARTIFACT_CHARS",
    "answer_text": "VICAR_MAX_ANSWER_CHARS",
    "artifact_file_bytes": "VICAR_MAX_ARTIFACT_FILE_BYTES",
}

# Custom search attributes Vicar registers so the Temporal UI can list waiting gates.
SEARCH_ATTRIBUTES: dict[str, str] = {
    "VicarStatus": "Keyword",
    "VicarPrincipal": "Keyword",
    "VicarState": "Keyword",
    "VicarTaskType": "Keyword",
    "VicarConfidence": "Double",
}


class MemoryParams(BaseModel):
    """ACT-R and retrieval parameters.

    d, tau, s and the score weights come from the replay evaluation's sweep on the
    shared dev data (bench/replay/report.md: 3,709 gates of 4 real reviewers,
    coordinate search by macro-F1): d = 0.5 (0.3: 0.365, 0.5: 0.368, 0.7: 0.366),
    tau = -5.0 (-1.5 forgets too much: 0.309), s = 0.25 (0.368 vs 0.360 without noise),
    w_activation / w_similarity = 0.25 / 0.75 (0.368 vs 0.343 at 0.5 / 0.5).
    - age_floor = 1: a trace made at the current N counts as one interaction old, so
      ln(0^-d) never occurs.
    - activation "exact": the hybrid (Petrov 2006, k = 3) bounds memory per chunk and
      is within 0.02 of exact on regular long histories, but errs up to 0.11 on long
      Poisson-random ones and 0.23 on short random ones (tests/test_activation.py,
      bench/MEMORY_RESULTS.md), so exact stays the default.
    - noise is seeded by (principal, N, phase), so a retried retrieval is identical.
    - spreading off (not yet evaluated); weight 1.0 over the top 3 seeds when on.
    """

    decay: float = 0.5
    threshold: float = -5.0
    age_floor: float = 1.0
    w_activation: float = 0.25
    w_similarity: float = 0.75
    top_k: int = 10
    activation_mode: Literal["exact", "hybrid"] = "exact"
    hybrid_k: int = 3
    noise_s: float = 0.25
    spreading: bool = False
    spreading_weight: float = 1.0
    spreading_seeds: int = 3


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


class CalibrationParams(BaseModel):
    """The design's six calibration guards (approval-gate-and-proxy.md), in order."""

    # Cold-start: cap while fewer distinct (state, task_type) pairs have a human
    # answer. The design ships 0 (off).
    memory_depth_threshold: int = 0
    staleness_days: float = 7.0
    exploration_rate: float = 0.15
    accuracy_min_interactions: int = 10
    accuracy_threshold: float = 0.85
    cap: float = 0.5  # what every guard caps the confidence at
    # Genuine tension: two retrieved human answers that disagree, both this relevant
    # (composite similarity) and close in time (interactions apart).
    tension_similarity: float = 0.8
    tension_window: int = 50


class Settings(BaseModel):
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".vicar")
    task_queue: str = TASK_QUEUE
    memory: MemoryParams = Field(default_factory=MemoryParams)
    predictor: PredictorParams = Field(default_factory=PredictorParams)
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    calibration: CalibrationParams = Field(default_factory=CalibrationParams)
    # Reviewer turns the proxy may take in one gate's dialog before the human decides.
    max_dialog_turns: int = 5
    session: SessionConfig = Field(default_factory=SessionConfig)
    # Directories under which artifact paths may be read; none: every path is refused.
    artifact_roots: list[Path] = Field(default_factory=list)
    limits: TextLimits = Field(default_factory=TextLimits)

    @classmethod
    def from_env(cls) -> "Settings":
        data_dir = os.environ.get("VICAR_DATA_DIR")
        settings = cls(data_dir=Path(data_dir).expanduser() if data_dir else Path.home() / ".vicar",
                       task_queue=os.environ.get("VICAR_TASK_QUEUE") or TASK_QUEUE)
        for var, target, attr in (
            ("VICAR_EXPLORATION_RATE", settings.calibration, "exploration_rate"),
            ("VICAR_SESSION_IDLE_SECONDS", settings.session, "idle_timeout_seconds"),
            ("VICAR_SESSION_TOKEN_BUDGET", settings.session, "token_budget"),
        ):
            raw = os.environ.get(var)
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                raise InvalidInput(f"{var} must be a number, not {raw!r}") from None
            if value < 0:
                raise InvalidInput(f"{var} must not be negative, not {raw!r}")
            setattr(target, attr, type(getattr(target, attr))(value))
        for attr, var in LIMIT_VARS.items():
            raw = os.environ.get(var)
            if raw is None:
                continue
            # Lower only: the models' own limits (the defaults) bind inside the workflow.
            ceiling = getattr(DEFAULT_LIMITS, attr)
            if not raw.strip().isdigit() or not 1 <= int(raw) <= ceiling:
                raise InvalidInput(f"{var} must be a whole number from 1 to {ceiling}, not {raw!r}")
            setattr(settings.limits, attr, int(raw))
        roots = os.environ.get("VICAR_ARTIFACT_ROOTS", "")
        settings.artifact_roots = [Path(os.path.expanduser(r.strip())).absolute()
                                   for r in roots.split(os.pathsep) if r.strip()]
        return settings

    def check_texts(self, **texts: str | None) -> None:
        """Refuse a text longer than its configured limit (a TextLimits field name), in one line."""
        for name, text in texts.items():
            limit = getattr(self.limits, name)
            if text and len(text) > limit:
                raise InvalidInput(f"{name} has {len(text)} characters, more than the limit of {limit} "
                                 f"({LIMIT_VARS[name]})")

    @property
    def principals_dir(self) -> Path:
        return self.data_dir / "principals"

    @property
    def embedding_cache(self) -> Path:
        return self.data_dir / "cache" / "embeddings.sqlite"

    @property
    def temporal_db(self) -> Path:
        return self.data_dir / "temporal" / "temporal.db"
