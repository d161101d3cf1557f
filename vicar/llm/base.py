"""The provider-neutral client interface and the mapping of provider failures onto
Temporal's retry semantics.

A prompt is a cacheable `prefix` (blocks identical across the passes and gates of a
session) plus a `body` that varies per call. Providers put the prefix where their
prompt cache can reuse it.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from vicar.models import Usage

# ApplicationError types, so a workflow's retry policy can name them.
TRANSIENT_ERROR = "LLMTransientError"
REQUEST_ERROR = "LLMRequestError"

# Statuses worth another attempt: timeout, lock conflict, rate limit, server side.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
MAX_RETRY_DELAY_S = 3600.0
_MESSAGE_LIMIT = 300
# Key-shaped tokens (sk-..., sk-ant-..., sk-proj-...), also the masked ones some
# providers echo back ("sk-proj-****abcd").
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{4,}")


class Completion(BaseModel):
    text: str
    usage: Usage
    model: str
    stop_reason: str | None = None


class LLMClient(Protocol):
    provider: str  # "anthropic", "openai"

    def complete(self, prefix: Sequence[str], body: str, *, model: str, max_tokens: int) -> Completion:
        """One completion. Raises ApplicationError (retryable or not) on provider failure."""
        ...


def retry_after(headers: Mapping[str, str] | None) -> timedelta | None:
    """The server's requested wait: `retry-after-ms`, else `retry-after` in seconds or
    as an HTTP date. None when absent or unparsable."""
    if not headers:
        return None
    seconds: float | None = None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            seconds = float(ms) / 1000.0
        except ValueError:
            seconds = None
    if seconds is None and headers.get("retry-after"):
        raw = headers["retry-after"].strip()
        try:
            seconds = float(raw)
        except ValueError:
            parsed = email.utils.parsedate_tz(raw)
            if parsed is not None:
                seconds = email.utils.mktime_tz(parsed) - time.time()
    if seconds is None or seconds != seconds or seconds < 0:  # NaN or in the past
        return None
    return timedelta(seconds=min(seconds, MAX_RETRY_DELAY_S))


def scrub(text: str, secrets: Sequence[str | None] = ()) -> str:
    """One line, bounded, with keys removed: safe for an exception message that Temporal
    stores in workflow history."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _KEY_LIKE.sub("[redacted]", text)
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def error_fields(body: object) -> tuple[str | None, str | None]:
    """(type, message) of a provider error body: Anthropic's {"type": "error",
    "error": {...}} or OpenAI's error object (the SDK unwraps "error")."""
    if not isinstance(body, Mapping):
        return None, None
    inner = body.get("error")
    if isinstance(inner, Mapping):
        body = inner
    etype, msg = body.get("type"), body.get("message")
    return (etype if isinstance(etype, str) else None, msg if isinstance(msg, str) else None)


def status_failure(
    provider: str, status: int, body: object, headers: Mapping[str, str] | None, secrets: Sequence[str | None]
) -> ApplicationError:
    etype, msg = error_fields(body)
    head = f"{provider}: {status}" + (f" {etype}" if etype else "")
    message = scrub(f"{head}: {msg}" if msg else head, secrets)
    if status in RETRYABLE_STATUSES or status >= 500:
        return ApplicationError(message, type=TRANSIENT_ERROR, next_retry_delay=retry_after(headers))
    return ApplicationError(message, type=REQUEST_ERROR, non_retryable=True)


def connection_failure(provider: str, exc: BaseException, secrets: Sequence[str | None]) -> ApplicationError:
    return ApplicationError(scrub(f"{provider}: connection failed: {exc}", secrets), type=TRANSIENT_ERROR)
