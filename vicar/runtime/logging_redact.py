"""Secrets out of log lines: query strings, credentials in URLs, Authorization headers
and API keys are replaced before a handler writes a record, whichever logger made it
(httpx logs every request's full URL at INFO, token included; the SDKs' errors quote
URLs and headers). Installed on the root logger's handlers by the worker and the CLI."""

from __future__ import annotations

import logging
import os
import re

MASK = "[redacted]"
# Environment variables whose values are secrets wherever they show up in a message.
SECRET_VAR = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|WEBHOOK_URL)", re.I)
# Loggers that may carry URLs, headers or keys, and may have handlers of their own.
LIBRARY_LOGGERS = ("httpx", "httpcore", "openai", "anthropic", "temporalio")
# Shorter values would mask ordinary words.
MIN_SECRET_CHARS = 8

_URL_QUERY = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#\"'<>]*)\?[^\s#\"'<>]*")
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@\"'<>]+@")
# "Authorization: Bearer x", "'x-api-key': 'x'", "api_key=x", "token=x" in any quoting.
_NAMED = re.compile(
    r"""(?<![A-Za-z0-9])((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|auth[-_]?token|token|secret|password)"""
    r"""(["']?\s*[:=]\s*["']?)((?:bearer|basic|token)\s+)?([^\s"',;}&)\]]+)""",
    re.I,
)
# Provider key shapes (OpenAI sk-..., Anthropic sk-ant-...), bare in a message.
_KEY_SHAPES = re.compile(r"\b(sk-(?:ant-)?[A-Za-z0-9_-]{16,})")


def _env_secrets() -> list[str]:
    values = []
    for name, value in os.environ.items():
        # VICAR_CODEC_KEY_FILE names where a secret is, which a log line may show.
        if (
            SECRET_VAR.search(name)
            and not name.upper().endswith(("_FILE", "_PATH", "_DIR"))
            and len(value.strip()) >= MIN_SECRET_CHARS
        ):
            values.append(value.strip())
    return sorted(set(values), key=len, reverse=True)  # the longest first: no partial mask


def redact(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    for value in secrets:
        # A secret URL (the webhook's) keeps what is not secret in it: where it points.
        # A token in its path (https://hooks.example/services/T0/B0/XYZ) masks all of it.
        shown = _redact_shapes(value) if "://" in value else MASK
        text = text.replace(value, shown if shown != value else MASK)
    return _redact_shapes(text)


def _redact_shapes(text: str) -> str:
    text = _URL_QUERY.sub(lambda m: f"{m.group(1)}?{MASK}", text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}", text)
    return _KEY_SHAPES.sub(MASK, text)


class RedactSecrets(logging.Filter):
    """Rewrites the record in place (message, exception and stack text), so every handler
    after it and every formatter sees only the redacted text. Never drops a record."""

    def __init__(self, handler: logging.Handler | None = None) -> None:
        super().__init__()
        self.handler = handler
        self.secrets = _env_secrets()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it; keep the raw text
            message = str(record.msg)
        record.msg, record.args = redact(message, self.secrets), None
        if record.exc_info and not record.exc_text:
            formatter = (self.handler.formatter if self.handler else None) or logging.Formatter()
            record.exc_text = formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put the filter on every handler of `logger` (the root) that lacks one; called after
    the handlers are set up. Python's last-resort handler gets it too (a command that
    configured nothing still writes warnings through it)."""
    logger = logger or logging.getLogger()
    handlers = list(logger.handlers)
    for name in LIBRARY_LOGGERS:  # a library that set up a handler of its own (OPENAI_LOG=debug)
        handlers += logging.getLogger(name).handlers
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets(handler))


def uninstall(logger: logging.Logger | None = None) -> None:
    handlers = list((logger or logging.getLogger()).handlers)
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for name in LIBRARY_LOGGERS:
        handlers += logging.getLogger(name).handlers
    for handler in handlers:
        for f in [f for f in getattr(handler, "filters", []) if isinstance(f, RedactSecrets)]:
            handler.removeFilter(f)
