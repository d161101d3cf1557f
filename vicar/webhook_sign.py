"""The webhook's envelope: Standard Webhooks' signature headers on every notice, and the
CloudEvents 1.0 structured form (VICAR_WEBHOOK_KIND=cloudevents).

Standard Webhooks (standardwebhooks.com): `webhook-id` (the same for every retry of one
notice), `webhook-timestamp` (seconds since the epoch, this attempt's) and
`webhook-signature`: `v1,` and the base64 HMAC-SHA256, under the operator's secret, of
`<id>.<timestamp>.<body>`. The secret is `whsec_` and the base64 of its bytes; several,
separated by spaces, while a receiver moves from one to the next: each signs, and the
header carries every signature, space-separated, as the spec allows.

The signing is the few lines the spec gives, written here rather than taken from the
`standardwebhooks` package: the tests verify Vicar's headers with that package, which then
checks an implementation that is not its own. The secret's text goes nowhere but into
the HMAC: not into an error (which names the variable, never the value), nor a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

from vicar.contracts import Notice
from vicar.errors import InvalidInput

SECRET_PREFIX = "whsec_"
# The spec: secrets of 24 to 64 random bytes.
MIN_SECRET_BYTES, MAX_SECRET_BYTES = 24, 64
MAX_SECRETS = 4
SECRET_VAR = "VICAR_WEBHOOK_SECRET"
CLOUDEVENTS_TYPE = "application/cloudevents+json; charset=utf-8"
EVENT_TYPE_PREFIX = "dev.vicar.gate."


def parse_secrets(text: str) -> list[bytes]:
    """The secrets' bytes; one line naming the variable, never its value, if malformed."""
    secrets = text.split()
    if not 0 < len(secrets) <= MAX_SECRETS:
        raise InvalidInput(f"{SECRET_VAR} must be 1 to {MAX_SECRETS} secrets separated by spaces")
    keys = []
    for n, secret in enumerate(secrets, 1):
        try:
            if not secret.startswith(SECRET_PREFIX):
                raise ValueError
            key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except (ValueError, binascii.Error):
            key = b""
        if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
            raise InvalidInput(
                f"{SECRET_VAR} must be {SECRET_PREFIX} and the base64 of {MIN_SECRET_BYTES}-{MAX_SECRET_BYTES} "
                f"random bytes (secret {n} is not; the value is not shown)"
            )
        keys.append(key)
    return keys


def signature(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join("v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in keys)


def signed_headers(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers; without a secret, the id and timestamp alone."""
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if keys:
        headers["webhook-signature"] = signature(keys, msg_id, timestamp, body)
    return headers


def cloudevent(notice: Notice, source: str) -> dict[str, Any]:
    """The notice as one CloudEvent 1.0 in structured mode: the event's attributes and, as
    its data, Vicar's Notice JSON. Its id is the notice's event_id, so a receiver that
    deduplicates on (source, id) sees a retried notice once."""
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": notice.event_id,
        "source": source,
        "type": EVENT_TYPE_PREFIX + notice.event,
        "subject": notice.gate.gate_id,
        "datacontenttype": "application/json",
        "data": notice.model_dump(mode="json"),
    }
    if notice.event == "escalated" and notice.gate.escalated_at is not None:
        event["time"] = notice.gate.escalated_at.isoformat()
    return event
