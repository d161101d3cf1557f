"""Every VICAR_* environment variable, declared once: its name (deployments and the docs
use it), the field it fills, what it means and what it accepts.

The default is the model's own (docs/configuration.md is generated from the two:
`python -m vicar.settings.doc`). `accepts` is both the page's column and the refusal:
a value the model does not take stops the start with `<name> must be <accepts>`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vicar.models.limits import DEFAULT_LIMITS
from vicar.runtime.sharding import MAX_SHARDS

# Sections of the generated page, in order.
PLACE, PREDICTOR, EMBEDDING, AUTONOMY, GATES, SESSIONS, SHARDS, LIMITS, OPS, KEYS, DEV = (
    "Data and Temporal",
    "Predictor",
    "Embedding",
    "The autonomy rule",
    "Gates",
    "Sessions",
    "Shards",
    "Text limits",
    "Operations",
    "Payload keys",
    "Development",
)
# Who reads a variable: `Settings` (validated once, at start), `ReadAtUse` (read each time
# it is used: the secrets and the debug switch) or a CLI option (click reads it).
Reader = Literal["Settings", "ReadAtUse", "cli"]


@dataclass(frozen=True)
class Var:
    name: str
    section: str
    help: str
    accepts: str  # completes "<name> must be ...": the page's column and the refusal's words
    field: str | None = None  # the dotted path of the field it fills in its reader's model
    read_by: Reader = "Settings"
    default: str | None = None  # shown instead of the model's default when that is not the story
    secret: bool = False  # never shown: not in a repr, a refusal or a log line
    # The value as the model takes it, from the stripped text (never raises: the model
    # validates). None: the text itself.
    parse: Callable[[str], Any] | None = None


def _lower(text: str) -> str:
    return text.lower()


def _path(text: str) -> Path:
    return Path(text).expanduser()


def _paths(text: str) -> list[Path]:
    return [Path(os.path.expanduser(p.strip())).absolute() for p in text.split(os.pathsep) if p.strip()]


def _off(text: str) -> str | None:
    return None if text.lower() in ("off", "0") else text


def _at_least_one(text: str) -> int | str:
    # As it always was: fewer than one thread means one.
    return max(1, int(text)) if re.fullmatch(r"[+-]?\d+", text) else text


def _on(text: str) -> bool:
    return text != "0"


BOOL = "true/false, 1/0 or yes/no"


def _pairs(text: str) -> dict[str, str] | str:
    """`a=b,c=d` as {a: b, c: d}; anything else as given, for the model to refuse."""
    pairs = [p.partition("=") for p in text.split(",") if p.strip()]
    if not all(sep and k.strip() and v.strip() for k, sep, v in pairs):
        return text
    return {k.strip(): v.strip() for k, _, v in pairs}


def _limit(name: str, field: str, help: str) -> Var:
    ceiling = getattr(DEFAULT_LIMITS, field)
    return Var(name, LIMITS, help, f"a whole number from 1 to {ceiling}", f"limits.{field}")


VARIABLES: tuple[Var, ...] = (
    Var(
        "VICAR_DATA_DIR",
        PLACE,
        "memories (`principals/<name>/memory.db` + `chroma/`), the payload keys and the embedded server's database",
        "a directory (`~` expands)",
        "data_dir",
        default="`~/.vicar`",
        parse=_path,
    ),
    Var("VICAR_TASK_QUEUE", PLACE, "the worker's task queue, and where the CLI starts gates", "a name", "task_queue"),
    *(
        Var(
            f"VICAR_SERVER_{field.upper()}",
            PLACE,
            f"the embedded Temporal server's {what}, on 127.0.0.1; a port given and taken stops the start",
            "a port from 1 to 65535",
            f"server.{field}",
            default=default,
        )
        for field, what, default in (
            (
                "port",
                "gRPC frontend (what clients and workers dial; two Vicars on one machine: each its own data "
                "directory and ports)",
                "7233, or a free port if taken",
            ),
            ("ui_port", "web UI", "8233, or a free port if taken"),
            ("http_port", "HTTP API", "a free port"),
            ("metrics_port", "Prometheus `/metrics`", "a free port"),
        )
    ),
    Var(
        "VICAR_PREDICTOR",
        PREDICTOR,
        "who predicts the human: `learned` (a per-principal model over the human's "
        "answer history, the memory vote until its first fit; no key), `offline` (the memory vote alone), "
        "`anthropic` (Messages API) or `openai` (Chat Completions). A chosen provider without its key, or an "
        "unpriced model, stops the worker at start with one line",
        "`learned`, `offline`, `anthropic` or `openai` (any case)",
        "predictor_name",
        default="`anthropic` if `ANTHROPIC_API_KEY` is set, else `openai` if `OPENAI_API_KEY` is set, else `learned`",
        parse=_lower,
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
        "VICAR_RECALIBRATION_WINDOW",
        PREDICTOR,
        "the confidence shown to the human is the score recalibrated on the latest this many "
        "human-graded answers (docs/confidence.md; the rule reads the score; 0: shown as scored)",
        "a whole number from 0 to 100000",
        "calibration.recalibration_window",
    ),
    Var(
        "VICAR_EMBEDDER",
        EMBEDDING,
        "`minilm` (local all-MiniLM-L6-v2 on onnxruntime), `minilm-torch` (the same "
        "model on sentence-transformers, the reference it is tested against to 1e-4), or `openai` (needs "
        "`OPENAI_API_KEY`). A memory built with one model refuses the other until `vicar memory reembed`",
        "`minilm`, `minilm-torch` or `openai` (any case)",
        "embedder.name",
        parse=_lower,
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
        "a whole number (below 1 counts as 1)",
        "embedder.threads",
        parse=_at_least_one,
    ),
    Var(
        "VICAR_AUTONOMY_TARGET_ERROR",
        AUTONOMY,
        "the error the proxy must be proven within before it answers "
        "alone (a principal's `autonomy.json` overrides the four, for the principal and per state)",
        "a number above 0, at most 1",
        "calibration.autonomy.target_error",
    ),
    Var(
        "VICAR_AUTONOMY_DELTA",
        AUTONOMY,
        "the bound's δ: it holds with probability 1 − δ, whenever it is read",
        "a number between 0 and 1",
        "calibration.autonomy.delta",
    ),
    Var(
        "VICAR_AUTONOMY_AUDIT_SHARE",
        AUTONOMY,
        "the share of the gates it would answer alone that still go to the human",
        "a number from 0 to 1",
        "calibration.autonomy.audit_share",
    ),
    Var(
        "VICAR_AUTONOMY_WEIGHTING",
        AUTONOMY,
        "ipw: every gate the rule lets through is a draw and an audit's label weighs the inverse of its "
        "probability; labelled: the human-labelled pairs alone, unweighted (docs/autonomy-bound.md)",
        "ipw or labelled",
        "calibration.autonomy.weighting",
        parse=_lower,
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
        "token) stays in the worker and out of logs, reprs and refusals",
        "an http(s) URL with a host",
        "webhook_url",
        secret=True,
    ),
    Var(
        "VICAR_WEBHOOK_KIND",
        GATES,
        "what the webhook receives: `vicar` (the Notice JSON, [orchestrator.md](orchestrator.md)) or "
        "`slack` (a chat message, `{text, blocks}`, as Slack's and most chat tools' incoming webhooks take it, "
        "with Approve / Reject buttons, [slack.md](slack.md)) or `cloudevents` (the Notice as a CloudEvent 1.0, "
        "structured mode)",
        "vicar, slack or cloudevents",
        "webhook_kind",
        parse=_lower,
    ),
    Var(
        "VICAR_WEBHOOK_SECRET",
        GATES,
        "signs every notice as Standard Webhooks says (`webhook-id`, `webhook-timestamp`, `webhook-signature`: "
        "HMAC-SHA256 of `id.timestamp.body`); several, space-separated, while a receiver rotates "
        "([webhooks.md](webhooks.md)); unset, notices carry the id and timestamp unsigned",
        "`whsec_` and the base64 of 24-64 random bytes",
        "webhook_secret",
        read_by="ReadAtUse",
        secret=True,
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
        "VICAR_HOOK_PRINCIPAL",
        GATES,
        "whom the single-principal hook (`vicar hook claude-code` without --url, and the inbox's "
        "`/hooks/claude-code` with the `VICAR_HOOK_TOKEN` token) opens its gates for; a principal's own "
        "hook token (`vicar hook install`) needs none ([claude-code.md](claude-code.md))",
        "a principal's name",
        "hook.principal",
    ),
    Var(
        "VICAR_HOOK_WAIT_SECONDS",
        GATES,
        "how long the hook waits for the person's answer (inbox, chat) before the agent asks them itself",
        "a number from 0 to 86400",
        "hook.wait_seconds",
    ),
    Var(
        "VICAR_HOOK_TOKEN",
        GATES,
        "the single-principal hook token the inbox's hook endpoints take for `VICAR_HOOK_PRINCIPAL` "
        "(without it: `<data dir>/hook-token`, made 0600 on first use); each principal's own token "
        "(`<data dir>/hook-tokens/<principal>`, `vicar hook install`) needs neither",
        "at least 16 characters",
        "hook_token",
        read_by="ReadAtUse",
        secret=True,
    ),
    Var(
        "VICAR_REQUIRE_IDENTITY_MATCH",
        GATES,
        "refuse a human answer whose Temporal client identity is not its "
        "responder's name ([identity.md](identity.md) says when that identity is trusted)",
        BOOL,
        "require_identity_match",
    ),
    Var(
        "VICAR_RESPONDER",
        GATES,
        "who `vicar answer` says is answering and `vicar review` says reviews (`--responder`, `--reviewer` "
        "win); read by those options",
        "a name",
        read_by="cli",
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
        parse=_paths,
    ),
    Var(
        "VICAR_SLACK_USERS",
        GATES,
        "who answers from Slack's buttons: Slack user ids and the inbox accounts they answer as, "
        "`U0123ABC=alice,U0456DEF=bob`; anyone else's tap is refused ([slack.md](slack.md))",
        "`SLACKID=account` pairs, comma-separated",
        "slack_users",
        parse=_pairs,
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
        "the shards this worker holds (`vicar worker --shards`, which reads it too)",
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
    _limit(
        "VICAR_MAX_QUESTION_CHARS",
        "question",
        "the longest question the CLI accepts (lower only: the models enforce the default everywhere)",
    ),
    _limit("VICAR_MAX_MESSAGE_CHARS", "actor_message", "the longest agent message (`actor_message`)"),
    _limit("VICAR_MAX_ARTIFACT_CHARS", "artifact_text", "the longest inline artifact"),
    _limit("VICAR_MAX_ANSWER_CHARS", "answer_text", "the longest human answer"),
    _limit("VICAR_MAX_ARTIFACT_FILE_BYTES", "artifact_file_bytes", "bytes read from each artifact path"),
    Var(
        "VICAR_OPS_ADDRESS",
        OPS,
        "the worker's `/healthz` + `/readyz` (off so a laptop opens no port; on in the container image)",
        "`IP:PORT` (e.g. `0.0.0.0:8080`), or `off`/`0`",
        "ops.address",
        default="off",
        parse=_off,
    ),
    Var(
        "VICAR_METRICS_ADDRESS",
        OPS,
        "the SDK's Prometheus `/metrics` with Vicar's gate metrics",
        "`IP:PORT` (e.g. `127.0.0.1:9464`), or `off`/`0`",
        "ops.metrics_address",
        default="off",
        parse=_off,
    ),
    Var(
        "VICAR_SHUTDOWN_GRACE_SECONDS",
        OPS,
        "after SIGTERM, running activities get this long to finish before they are cancelled",
        "a number of seconds from 0 to 3600",
        "ops.shutdown_grace_seconds",
    ),
    Var(
        "VICAR_CODEC_KEYS",
        KEYS,
        "the payload keys ([codec.md](codec.md)), oldest first; the last one seals",
        "`id:base64-key` entries, comma-separated",
        "codec_keys",
        read_by="ReadAtUse",
        secret=True,
    ),
    Var(
        "VICAR_CODEC_KEY_FILE",
        KEYS,
        "a file of payload keys, one `id:base64-key` a line (without either: "
        "`<data dir>/codec-keys`, made 0600 on first use)",
        "a readable file",
        "codec_key_file",
        read_by="ReadAtUse",
        parse=_path,
    ),
    Var(
        "VICAR_CODEC_SERVER_TOKEN",
        KEYS,
        "the bearer token `vicar codec-server` requires (without it: "
        "`<data dir>/codec-server-token`, made 0600 on first use)",
        "at least 16 characters",
        "codec_server_token",
        read_by="ReadAtUse",
        secret=True,
    ),
    Var(
        "VICAR_SLACK_SIGNING_SECRET",
        KEYS,
        "the Slack app's signing secret: the inbox's `/slack/actions` refuses every request not signed with it "
        "([slack.md](slack.md)); unset, it refuses every request",
        "the signing secret Slack shows for the app",
        "slack_signing_secret",
        read_by="ReadAtUse",
        secret=True,
    ),
    Var(
        "VICAR_DEBUG",
        DEV,
        "an unexpected error shows its traceback (CLI) and every exception chain (worker)",
        "anything but empty or `0` turns it on",
        "debug",
        read_by="ReadAtUse",
        default="off",
        parse=_on,
    ),
)
BY_NAME: dict[str, Var] = {v.name: v for v in VARIABLES}


def read_by(reader: Reader) -> tuple[Var, ...]:
    return tuple(v for v in VARIABLES if v.read_by == reader)


def variable_of(field: str, reader: Reader = "Settings") -> str:
    """The variable that fills a field (`ops.address` -> VICAR_OPS_ADDRESS)."""
    return next(v.name for v in VARIABLES if v.field == field and v.read_by == reader)


def fields_under(prefix: str) -> dict[str, str]:
    """{field: variable} for the variables filling the fields of one Settings section."""
    return {
        v.field[len(prefix) + 1 :]: v.name
        for v in read_by("Settings")
        if v.field and v.field.startswith(prefix + ".") and "." not in v.field[len(prefix) + 1 :]
    }
