"""Signed webhooks (issue 38 item 4): every notice carries Standard Webhooks' headers,
signed with the operator's VICAR_WEBHOOK_SECRET, and the `standardwebhooks` library (not
Vicar's code) verifies them; VICAR_WEBHOOK_KIND=cloudevents sends a CloudEvent 1.0 in
structured mode, read back by the `cloudevents` SDK. The secret never reaches a log. A
real gate on the real Temporal server, a receiver on loopback."""

from __future__ import annotations

import base64
import logging
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from vicar.client.gates import answer_gate, start_gate
from vicar.errors import InvalidInput
from vicar.models import HumanAnswer
from vicar.settings import CalibrationParams, Settings
from vicar.webhook_sign import parse_secrets

from .conftest import LOOSE_AUTONOMY, wait_escalated, wait_for


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class Receiver:
    """A webhook receiver on loopback: keeps each POST's raw body and headers."""

    def __init__(self) -> None:
        self.posts: list[tuple[bytes, dict[str, str]]] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.posts.append((body, dict(self.headers)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/vicar"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


SECRETS = [new_secret(), new_secret()]  # the old and the new, while the receiver rotates


@pytest.fixture(params=["vicar", "slack", "cloudevents"])
def settings(tmp_path: Path, receiver, request, monkeypatch) -> Settings:
    # Read at each notice by the worker, which runs in this process.
    monkeypatch.setenv("VICAR_WEBHOOK_SECRET", " ".join(SECRETS))
    return Settings(
        data_dir=tmp_path / "vicar",
        calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY),
        webhook_url=receiver.url,
        webhook_kind=request.param,
        inbox_url="http://127.0.0.1:8765",
    )


async def escalate_and_receive(h, receiver):
    req = h.request(h.principal(), question="Ship the release notes?", escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)

    async def posted():
        return receiver.posts

    [(body, headers)] = await wait_for(posted)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder="bo"))
    await handle.result()
    return req, handle, body, headers


async def test_every_kind_of_notice_is_signed_as_standard_webhooks_says(harness, receiver, caplog):
    h = harness
    caplog.set_level(logging.DEBUG)
    req, handle, body, headers = await escalate_and_receive(h, receiver)
    event_id = f"{handle.id}/escalated"
    assert headers["webhook-id"] == headers["Idempotency-Key"] == event_id
    # Each secret of the rotation verifies the notice alone, with the library's own check.
    for secret in SECRETS:
        payload = Webhook(secret).verify(body, headers)
        assert req.gate_id in str(payload)
    assert len(headers["webhook-signature"].split()) == 2
    # Anything changed, or another secret, fails.
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRETS[0]).verify(body.replace(b"release", b"relapse"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRETS[0]).verify(body, {**headers, "webhook-id": f"{handle.id}/timed_out"})
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    kind = h.settings.webhook_kind
    if kind == "cloudevents":
        from cloudevents.core.bindings.http import HTTPMessage, from_structured_event

        assert headers["Content-Type"].startswith("application/cloudevents+json")
        event = from_structured_event(HTTPMessage(headers=headers, body=body))
        assert event.get_specversion() == "1.0" and event.get_id() == event_id
        assert event.get_type() == "dev.vicar.gate.escalated" and event.get_subject() == req.gate_id
        assert event.get_source() == f"/vicar/{h.settings.task_queue}" and event.get_time() is not None
        data = event.get_data()
        assert data["event"] == "escalated" and data["gate"]["gate_id"] == req.gate_id
    else:
        assert headers["Content-Type"] == "application/json"
    # No log line holds a secret, or its bytes.
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in SECRETS:
        assert secret not in logged and secret.removeprefix("whsec_") not in logged


@pytest.mark.parametrize("settings", ["vicar"], indirect=True)
async def test_a_malformed_secret_is_one_line_and_never_shown(harness, receiver, monkeypatch, caplog):
    h = harness
    bad = "whsec_" + base64.b64encode(b"short-secret").decode()
    monkeypatch.setenv("VICAR_WEBHOOK_SECRET", bad)
    caplog.set_level(logging.DEBUG)
    req = h.request(h.principal(), escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)  # the gate goes on waiting for the person

    async def refused():
        return [r for r in caplog.records if "VICAR_WEBHOOK_SECRET must be" in r.getMessage()]

    await wait_for(refused)
    assert receiver.posts == []  # nothing unsigned goes out when a secret is set
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert bad not in logged and bad.removeprefix("whsec_") not in logged
    await handle.terminate()


def test_secrets_are_checked_without_showing_them():
    good = new_secret()
    assert parse_secrets(f"  {good}  ") == [base64.b64decode(good[6:])]
    for bad in (
        "plain-text-secret-without-prefix-xxxxxx",
        "whsec_!!!notbase64",
        "whsec_" + "QUJD",
        " ".join([good] * 5),
    ):
        with pytest.raises(InvalidInput, match="VICAR_WEBHOOK_SECRET must be") as refused:
            parse_secrets(bad)
        assert bad not in str(refused.value) and good not in str(refused.value)


def test_the_cloudevents_kind_is_a_setting(monkeypatch):
    for name in [n for n in os.environ if n.startswith("VICAR_WEBHOOK")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("VICAR_WEBHOOK_KIND", "CloudEvents")
    assert Settings.from_env().webhook_kind == "cloudevents"
    monkeypatch.setenv("VICAR_WEBHOOK_KIND", "xml")
    with pytest.raises(InvalidInput, match="VICAR_WEBHOOK_KIND must be vicar, slack or cloudevents"):
        Settings.from_env()
