"""Every VICAR_* environment variable, declared once, and the one place they are read.

Each `Var` names the variable, the setting it fills (a dotted path into
vicar.config.Settings, whose model default is the variable's default, so the
generated page cannot drift from the code), what it means and what it accepts.
`raw` is the only `os.environ` read of a VICAR_* name in the tree
(tests/test_configuration_doc.py checks it); vicar.config turns the raw values into
a validated Settings at start, and the typed readers below serve what is read later
(the predictor's choice, the LLM's models, secrets that must not sit in Settings).
docs/configuration.md is generated from here: `python -m vicar.config_doc`.

memory/ (the ground floor) reads no environment: its callers pass these values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vicar.errors import InvalidInput
from vicar.runtime.sharding import MAX_SHARDS

# Sections of the generated page, in order.
PLACE, PREDICTOR, EMBEDDING, MECHANISMS, AUTONOMY, GATES, SESSIONS, SHARDS, LIMITS, OPS, KEYS, DEV, TEST = (
    "Data and Temporal",
    "Predictor",
    "Embedding",
    "Memory kinds and the trust ledger",
    "The autonomy rule",
    "Gates",
    "Sessions",
    "Shards",
    "Text limits",
    "Operations",
    "Payload keys",
    "Development",
    "Test-only",
)


@dataclass(frozen=True)
class Var:
    name: str
    section: str
    help: str
    accepts: str  # what a valid value is; anything else is refused in one line
    field: str | None = None  # the Settings attribute it fills (its default is the default)
    default: str | None = None  # shown when there is no field, or the field's default is not the story
    test_only: bool = False
    secret: bool = False  # never printed: not in Settings' repr, not in refusals


VARS: tuple[Var, ...] = (
    Var(
        "VICAR_DATA_DIR",
        PLACE,
        "memories (`principals/<name>/memory.db` + `chroma/`), the payload keys and the embedded server's database",
        "a directory (`~` expands)",
        "data_dir",
        default="`~/.vicar`",
    ),
    Var("VICAR_TASK_QUEUE", PLACE, "the worker's task queue, and where the CLI starts gates", "a name", "task_queue"),
    Var(
        "VICAR_PREDICTOR",
        PREDICTOR,
        "who predicts the human: `learned` (a per-principal model over the human's "
        "answer history, the memory vote until its first fit; no key), `offline` (the memory vote alone), "
        "`anthropic` (Messages API) or `openai` (Chat Completions). A chosen provider without its key, or an "
        "unpriced model, stops the worker at start with one line",
        "`learned`, `offline`, `anthropic`, `openai` (any case)",
        "predictor",
        default="`anthropic` if `ANTHROPIC_API_KEY` is set, else `openai` if `OPENAI_API_KEY` is set, else `learned`",
    ),
    Var(
        "VICAR_LLM_MODEL",
        PREDICTOR,
        "the LLM passes' model; prices in `vicar/llm/pricing.py`",
        "a priced model name",
        "llm.model",
        default="`claude-sonnet-4-6`; `gpt-4.1`",
    ),
    Var(
        "VICAR_LLM_CLASSIFIER_MODEL",
        PREDICTOR,
        "the cheaper model for classification, surprise and the agent side's dialog replies",
        "a priced model name",
        "llm.classifier_model",
        default="`claude-haiku-4-5`; `gpt-4.1-mini`",
    ),
    Var("VICAR_LLM_TIMEOUT", PREDICTOR, "seconds one LLM request may take", "a positive number", "llm.timeout_s"),
    Var(
        "VICAR_EMBEDDER",
        EMBEDDING,
        "`minilm` (local all-MiniLM-L6-v2 on onnxruntime), `minilm-torch` (the same "
        "model on sentence-transformers, the reference it is tested against to 1e-4), or `openai` (needs "
        "`OPENAI_API_KEY`). A memory built with one model refuses the other until `vicar memory reembed`",
        "`minilm`, `minilm-torch`, `openai` (any case)",
        "embedder.name",
    ),
    Var(
        "VICAR_OPENAI_EMBEDDING_MODEL",
        EMBEDDING,
        "the OpenAI embedding model (with `VICAR_EMBEDDER=openai`)",
        "a model name",
        "embedder.openai_model",
    ),
    Var(
        "VICAR_EMBED_THREADS",
        EMBEDDING,
        "onnxruntime's threads per embedding call",
        "a whole number >= 1",
        "embedder.threads",
    ),
    Var(
        "VICAR_PROBATION_ANSWERS",
        MECHANISMS,
        "a gate naming an upstream agent is never answered alone until "
        "the human has answered this many of that agent's artifacts (0: off)",
        "0 to 1000",
        "calibration.probation_answers",
    ),
    Var(
        "VICAR_TRUST_FLOOR",
        MECHANISMS,
        "an upstream agent whose trust score is below this is never answered alone (0: off)",
        "0 to 1",
        "calibration.trust_floor",
    ),
    Var(
        "VICAR_REGRET_WINDOW",
        MECHANISMS,
        "regret: a human correction finds the proxy's approvals on the same "
        "lineage this many interactions back (0: off; 100 when on)",
        "0 to 100000",
        "calibration.regret_window",
    ),
    Var(
        "VICAR_CENSOR_MIN",
        MECHANISMS,
        "censors are learned once the human has turned back this many alike "
        "artifacts of one context (0: off; 3 when on)",
        "0 to 1000",
        "calibration.censor_min",
    ),
    Var(
        "VICAR_CENSOR_SIMILARITY",
        MECHANISMS,
        "how alike (mean cosine) those artifacts must be",
        "above 0, at most 1",
        "calibration.censor_similarity",
    ),
    Var(
        "VICAR_PREFERENCES",
        MECHANISMS,
        "learn the human's preferences from the concerns they repeat",
        "true/false, 1/0, yes/no",
        "facts.preferences",
    ),
    Var(
        "VICAR_PROCEDURES",
        MECHANISMS,
        "learn the checks the human keeps running",
        "true/false, 1/0, yes/no",
        "facts.procedures",
    ),
    Var(
        "VICAR_HINDSIGHT_FACTOR",
        MECHANISMS,
        "how much further a disconfirmation moves a fact's confidence than a confirmation (1: symmetric)",
        "1 to 9",
        "facts.hindsight_factor",
    ),
    Var(
        "VICAR_STORAGE_DECISION",
        MECHANISMS,
        "the storage decision for new gate chunks (off keeps every one)",
        "true/false, 1/0, yes/no",
        "memory.storage",
    ),
    Var(
        "VICAR_TRUST_FEATURE",
        MECHANISMS,
        "the learned model reads the upstream agent's trust score",
        "true/false, 1/0, yes/no",
        "predictor.trust_feature",
    ),
    Var(
        "VICAR_AUTONOMY_TARGET_ERROR",
        AUTONOMY,
        "the error the proxy must be proven within before it answers "
        "alone (a principal's `autonomy.json` overrides the four, for the principal and per state)",
        "above 0, at most 1",
        "calibration.autonomy.target_error",
    ),
    Var(
        "VICAR_AUTONOMY_DELTA",
        AUTONOMY,
        "the bound's δ: it holds with probability 1 − δ, whenever it is read",
        "between 0 and 1",
        "calibration.autonomy.delta",
    ),
    Var(
        "VICAR_AUTONOMY_WINDOW",
        AUTONOMY,
        "no longer read: the rule's bets run over every human-graded gate (kept for old settings)",
        "a whole number, 1 to 100000",
        "calibration.autonomy.window",
    ),
    Var(
        "VICAR_AUTONOMY_AUDIT_SHARE",
        AUTONOMY,
        "the share of the gates it would answer alone that still go to the human",
        "0 to 1",
        "calibration.autonomy.audit_share",
    ),
    Var(
        "VICAR_AUTONOMY_WEIGHTING",
        AUTONOMY,
        "ipw: every gate the rule lets through is a draw and an audit's label weighs the inverse of its "
        "probability; labelled: the human-labelled pairs alone, unweighted (docs/autonomy-bound.md)",
        "ipw or labelled",
        "calibration.autonomy.weighting",
    ),
    Var(
        "VICAR_RECALIBRATION_WINDOW",
        MECHANISMS,
        "the confidence shown to the human is the score recalibrated on the latest this many "
        "human-graded answers (docs/confidence.md; the rule reads the score; 0: shown as scored)",
        "a whole number, 0 to 100000",
        "calibration.recalibration_window",
    ),
    Var(
        "VICAR_GATE_DEADLINE_SECONDS",
        GATES,
        "a gate's deadline when its request sets none, in seconds from "
        "its start: then it ends `timed_out` with the proxy's guess (0: no deadline)",
        "a number >= 0",
        "gate_deadline_seconds",
    ),
    Var(
        "VICAR_WEBHOOK_URL",
        GATES,
        "escalations and deadlines are POSTed here as JSON; the URL (it may hold a "
        "token) stays in the worker and out of logs and refusals",
        "an http(s) URL with a host",
        "webhook_url",
        secret=True,
    ),
    Var(
        "VICAR_WEBHOOK_KIND",
        GATES,
        "what the webhook receives: `vicar` (the Notice JSON, [orchestrator.md](orchestrator.md)) or "
        "`slack` (a chat message, `{text, blocks}`, as Slack's and most chat tools' incoming webhooks take it)",
        "vicar or slack",
        "webhook_kind",
    ),
    Var(
        "VICAR_INBOX_URL",
        GATES,
        "the inbox's address as reviewers reach it (e.g. `http://127.0.0.1:8765`): chat messages link "
        "each gate's page, `<url>/gates/<workflow id>` ([gate-show.md](gate-show.md))",
        "an http(s) URL with a host",
        "inbox_url",
    ),
    Var(
        "VICAR_REQUIRE_IDENTITY_MATCH",
        GATES,
        "refuse a human answer whose Temporal client identity is not its "
        "responder's name ([identity.md](identity.md) says when that identity is trusted)",
        "1/0, true/false, yes/no",
        "require_identity_match",
    ),
    Var(
        "VICAR_RESPONDER",
        GATES,
        "who `vicar answer` says is answering (`--responder` wins); read by that option",
        "a name",
        default="your OS user name",
    ),
    Var(
        "VICAR_ARTIFACT_ROOTS",
        GATES,
        "directories under which a gate's `artifact_paths` may be read: the real "
        "path must be inside one, only regular files are read; any other path is refused in one line",
        "directories separated by `os.pathsep` (`:`)",
        "artifact_roots",
        default="unset (every path refused)",
    ),
    Var(
        "VICAR_SESSION_IDLE_SECONDS",
        SESSIONS,
        "a session ends after this long with no gate joining or finishing",
        "a number >= 0",
        "session.idle_timeout_seconds",
    ),
    Var(
        "VICAR_SESSION_TOKEN_BUDGET",
        SESSIONS,
        "its working-memory block holds about this many tokens (4 characters a token)",
        "a whole number >= 0",
        "session.token_budget",
    ),
    Var(
        "VICAR_SHARD_COUNT",
        SHARDS,
        "the number of memory shards, fixed at deploy (unset: one worker does everything)",
        f"a whole number from 1 to {MAX_SHARDS}",
        "shard_count",
    ),
    Var(
        "VICAR_SHARDS",
        SHARDS,
        "the shards this worker holds (`vicar worker --shards`)",
        "`all`, `0-3`, `0,2,5`, or `pod:R` (the shards k with k % R equal to the hostname's ordinal)",
        "shards",
    ),
    Var(
        "VICAR_SHARD_WAIT_SECONDS",
        SHARDS,
        "how long a gate waits for its shard's owner before the human decides",
        "a number >= 0",
        "shard_wait_seconds",
    ),
    Var(
        "VICAR_MAX_QUESTION_CHARS",
        LIMITS,
        "the longest question the CLI accepts (lower only: the models enforce the default everywhere)",
        "1 to the default",
        "limits.question",
    ),
    Var(
        "VICAR_MAX_MESSAGE_CHARS",
        LIMITS,
        "the longest agent message (`actor_message`)",
        "1 to the default",
        "limits.actor_message",
    ),
    Var("VICAR_MAX_ARTIFACT_CHARS", LIMITS, "the longest inline artifact", "1 to the default", "limits.artifact_text"),
    Var("VICAR_MAX_ANSWER_CHARS", LIMITS, "the longest human answer", "1 to the default", "limits.answer_text"),
    Var(
        "VICAR_MAX_ARTIFACT_FILE_BYTES",
        LIMITS,
        "bytes read from each artifact path",
        "1 to the default",
        "limits.artifact_file_bytes",
    ),
    Var(
        "VICAR_OPS_ADDRESS",
        OPS,
        "the worker's `/healthz` + `/readyz` (off so a laptop opens no port; on in the container image)",
        "`IP:PORT`, or `off`/`0`",
        "ops.address",
        default="off",
    ),
    Var(
        "VICAR_METRICS_ADDRESS",
        OPS,
        "the SDK's Prometheus `/metrics` with Vicar's gate metrics",
        "`IP:PORT`, or `off`/`0`",
        "ops.metrics_address",
        default="off",
    ),
    Var(
        "VICAR_SHUTDOWN_GRACE_SECONDS",
        OPS,
        "after SIGTERM, running activities get this long to finish before they are cancelled",
        "0 to 3600 (seconds)",
        "ops.shutdown_grace_seconds",
    ),
    Var(
        "VICAR_CODEC_KEYS",
        KEYS,
        "the payload keys ([codec.md](codec.md)), oldest first; the last one seals",
        "`id:base64-key` entries, comma-separated",
        default="unset",
        secret=True,
    ),
    Var(
        "VICAR_CODEC_KEY_FILE",
        KEYS,
        "a file of payload keys, one `id:base64-key` a line (without either: "
        "`<data dir>/codec-keys`, made 0600 on first use)",
        "a readable file",
        default="unset",
    ),
    Var(
        "VICAR_CODEC_SERVER_TOKEN",
        KEYS,
        "the bearer token `vicar codec-server` requires (without it: "
        "`<data dir>/codec-server-token`, made 0600 on first use)",
        "at least 16 characters",
        default="unset",
        secret=True,
    ),
    Var(
        "VICAR_DEBUG",
        DEV,
        "an unexpected error shows its traceback (CLI) and every exception chain (worker)",
        "anything but empty or `0` turns it on",
        default="off",
    ),
    Var(
        "VICAR_TEST_MOVE_PIECE_DELAY",
        TEST,
        "seconds a memory move waits before writing each piece, so a test can kill a worker in the middle",
        "a number of seconds",
        default="`0`",
        test_only=True,
    ),
    Var(
        "VICAR_TEST_CONSOLIDATION_STEP_DELAY",
        TEST,
        "seconds consolidation waits before each decision, so a test can kill a worker in the middle",
        "a number of seconds",
        default="`0`",
        test_only=True,
    ),
)
BY_NAME: dict[str, Var] = {v.name: v for v in VARS}


def raw(name: str) -> str | None:
    """The variable's raw value (None when unset): the one place VICAR_* is read."""
    if name not in BY_NAME:
        raise KeyError(f"{name} is not declared in vicar/settings_env.py")
    return os.environ.get(name)


def text(name: str) -> str:
    """The value stripped, "" when unset."""
    return (raw(name) or "").strip()


def fields_under(prefix: str) -> dict[str, str]:
    """{field: variable} for the variables filling attributes of one Settings section."""
    return {
        v.field[len(prefix) + 1 :]: v.name
        for v in VARS
        if v.field and v.field.startswith(prefix + ".") and "." not in v.field[len(prefix) + 1 :]
    }


def debug() -> bool:
    return text("VICAR_DEBUG") not in ("", "0")


def test_delay(name: str) -> float:
    """A test-only pause in seconds (0 unless a test sets it)."""
    assert BY_NAME[name].test_only, name
    return float(raw(name) or "0" or 0)


def predictor() -> str | None:
    """VICAR_PREDICTOR, lower-cased; None when unset (the keys decide)."""
    from vicar.config import PREDICTORS

    name = text("VICAR_PREDICTOR").lower()
    if name and name not in PREDICTORS:
        raise InvalidInput(f"unknown VICAR_PREDICTOR {name!r}; available: {', '.join(PREDICTORS)}")
    return name or None


def llm_timeout() -> float:
    raw_timeout = text("VICAR_LLM_TIMEOUT")
    try:
        timeout_s = float(raw_timeout) if raw_timeout else 120.0
    except ValueError:
        raise InvalidInput(f"VICAR_LLM_TIMEOUT must be a number of seconds, got {raw_timeout!r}") from None
    if not timeout_s > 0:
        raise InvalidInput(f"VICAR_LLM_TIMEOUT must be positive, got {raw_timeout!r}")
    return timeout_s
