"""Settings: where data lives, which Temporal to use, how the proxy decides and what the
worker serves. One validated model, read from the VICAR_* environment at start
(pydantic-settings), with defaults that work on a fresh machine.

`Settings()` (or `Settings.from_env()`, as commands spell it) reads the declared
variables (vicar/settings/variables.py); keyword arguments win over them. Every bad value
stops the start with one line each and exit code 2 (vicar.errors.SettingsError).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from vicar.errors import InvalidInput
from vicar.memory.params import EmbedderParams, MemoryParams
from vicar.runtime.sharding import MAX_SHARDS, parse_shards
from vicar.settings.hook import HookParams
from vicar.settings.sections import (
    CalibrationParams,
    FactParams,
    LimitParams,
    LLMParams,
    OpsParams,
    PredictorParams,
    RetrievalOptions,
    ServerPorts,
    SessionParams,
)
from vicar.settings.source import Variables, refusal
from vicar.settings.variables import fields_under

TASK_QUEUE = "vicar"
# A week: a gate nobody answers ends (timed_out, with the proxy's guess) rather than
# holding an orchestrator for ever. VICAR_GATE_DEADLINE_SECONDS, or the request's own.
DEFAULT_GATE_DEADLINE_SECONDS = 7 * 24 * 3600.0
ANSWER_TIMEOUT = 30.0  # seconds a gate has to take a human answer before the caller is told why not
# The variables that lower Vicar's text limits, by TextLimits field.
LIMIT_VARS: dict[str, str] = fields_under("limits")
OPS_VARS: dict[str, str] = fields_under("ops")  # the worker's operational surface, by OpsParams field


# A Slack user id: U or W and upper-case letters and digits.
SLACK_USER_RE = re.compile(r"[UW][A-Z0-9]{2,31}")


def _http_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError("http_url", "must be an http(s) URL with a host")
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VICAR_", extra="forbid")

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".vicar")
    task_queue: str = TASK_QUEUE
    server: ServerPorts = Field(default_factory=ServerPorts)  # the embedded Temporal server's ports
    memory: MemoryParams = Field(default_factory=MemoryParams)
    # Who predicts the human (None: the first provider whose key the worker has, else
    # the learned model; vicar.proxy.select).
    predictor_name: Literal["learned", "offline", "anthropic", "openai"] | None = None
    predictor: PredictorParams = Field(default_factory=PredictorParams)
    llm: LLMParams = Field(default_factory=LLMParams)
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    calibration: CalibrationParams = Field(default_factory=CalibrationParams)
    facts: FactParams = Field(default_factory=FactParams)
    # Reviewer turns the proxy may take in one gate's dialog before the human decides.
    max_dialog_turns: int = 5
    session: SessionParams = Field(default_factory=SessionParams)
    # Directories under which artifact paths may be read; none: every path is refused.
    artifact_roots: list[Path] = Field(default_factory=list)
    limits: LimitParams = Field(default_factory=LimitParams)
    # Sharded memory (vicar.runtime.sharding): None runs unsharded, one worker doing everything.
    shard_count: int | None = Field(None, ge=1, le=MAX_SHARDS)
    shards: str = "all"  # which shards this worker serves (--shards)
    # A gate waits this long for its shard's owner to take work, then the human decides.
    shard_wait_seconds: float = Field(60.0, ge=0.0)
    # A gate's deadline when its request sets none (seconds from its start; 0: none).
    gate_deadline_seconds: float = Field(DEFAULT_GATE_DEADLINE_SECONDS, ge=0.0)
    # Escalations and deadlines are POSTed here as JSON (None: nobody is told). It may
    # hold a token: never in a repr (nor, by vicar.runtime.logging_redact, a log line).
    webhook_url: str | None = Field(None, repr=False)
    # The Notice JSON, a chat message, or the Notice as a CloudEvent (structured mode).
    webhook_kind: Literal["vicar", "slack", "cloudevents"] = "vicar"
    inbox_url: str | None = None  # where a chat message links a gate's page (None: no link)
    # Slack user ids and the inbox accounts they answer as, from Slack's buttons (docs/slack.md).
    slack_users: dict[str, str] = Field(default_factory=dict, max_length=1000)
    ops: OpsParams = Field(default_factory=OpsParams)
    # Refuse a human answer whose Temporal client identity is not its responder's name
    # (docs/identity.md says when that identity is trusted).
    require_identity_match: bool = False
    embedder: EmbedderParams = Field(default_factory=EmbedderParams)
    hook: HookParams = Field(default_factory=HookParams)  # the coding agents' hook (vicar/hooks)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise refusal(exc, Variables(type(self), "Settings").given(), set(values)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, Variables(settings_cls, "Settings")

    @classmethod
    def from_env(cls) -> Settings:
        """The settings of this process's environment, every value checked (at start)."""
        return cls()

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("slack_users")
    @classmethod
    def _slack_users(cls, value: dict[str, str]) -> dict[str, str]:
        from vicar.models import check_responder

        for user, name in value.items():
            if not SLACK_USER_RE.fullmatch(user):
                raise PydanticCustomError("slack_user", "a Slack user id is letters and digits")
            check_responder(name)
        return value

    @field_validator("inbox_url")
    @classmethod
    def _inbox_url(cls, value: str | None) -> str | None:
        url = _http_url(value)
        return url.rstrip("/") if url else url

    @model_validator(mode="after")
    def _blended_vectors_follow_retrieval(self) -> Settings:
        wanted = self.retrieval.embedding == "blended"
        if self.memory.blended_vectors != wanted:
            self.memory = self.memory.model_copy(update={"blended_vectors": wanted})
        return self

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
