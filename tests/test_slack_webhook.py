"""The webhook's chat kind (issue 28 item 4): with VICAR_WEBHOOK_KIND=slack an escalated
gate POSTs a Slack incoming-webhook message (`text`, `blocks`) with its one-line summary
and a link to its inbox page; Vicar's own Notice carries the artifact's first line, the
agent and the deadline. A real gate on the real Temporal server, a receiver on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vicar.client.gates import answer_gate, start_gate
from vicar.errors import InvalidInput
from vicar.models import HumanAnswer
from vicar.settings import CalibrationParams, Settings

from .conftest import LOOSE_AUTONOMY, wait_escalated, wait_for

INBOX = "http://127.0.0.1:8765"
# Slack reads <url|text> as a link and <!channel> as a mention: an artifact must do neither.
HOSTILE = "Docs only. <!channel> <http://evil.example|click> & also DROP TABLE users;"


class Receiver:
    """A chat tool's incoming webhook on loopback: keeps each POST's JSON and headers."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict, dict]] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.posts.append((body, dict(self.headers)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/xyz"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(params=["slack", "vicar"])
def settings(tmp_path: Path, receiver, request) -> Settings:
    return Settings(
        data_dir=tmp_path / "vicar",
        calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY),
        webhook_url=receiver.url,
        webhook_kind=request.param,
        inbox_url=INBOX,
    )


async def test_an_escalation_is_posted_as_the_kind_asks(harness, receiver):
    h = harness
    req = h.request(
        h.principal(),
        state="WORK_ASSERT",
        task_type="docs",
        question="Merge this docs-only change?",
        artifact=HOSTILE,
        upstream_agent="writer-bot",
        deadline_seconds=3600,
        escalation_mode="always",
    )
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)

    async def posted():
        return receiver.posts

    [(body, headers)] = await wait_for(posted)
    assert headers["Idempotency-Key"] == f"{handle.id}/escalated"
    if h.settings.webhook_kind == "slack":
        assert set(body) == {"text", "blocks"}
        link = f"{INBOX}/gates/{handle.id}"
        assert req.gate_id in body["text"] and "Merge this docs-only change?" in body["text"]
        assert f"<{link}|open>" in body["text"]
        approve, ask_first, button = [b for b in body["blocks"] if b["type"] == "actions"][0]["elements"]
        assert (ask_first["action_id"], ask_first["value"]) == ("vicar.approve_ask_first", handle.id)
        assert button["url"] == link
        # The button that answers carries the gate's workflow id, not a link (tests/test_slack_actions.py);
        # no Reject: it would send no words (issue 46).
        assert (approve["action_id"], approve["value"]) == ("vicar.approve", handle.id) and "url" not in approve
        first = body["blocks"][0]["text"]["text"]
        assert "DROP TABLE users" in first and "writer-bot" in first and "deadline" in first
        everything = json.dumps(body)
        assert "<!channel>" not in everything and "<http://evil" not in everything
        assert "&lt;!channel&gt;" in first and "&amp; also" in first
    else:
        gate = body["gate"]
        assert body["event"] == "escalated" and gate["artifact_excerpt"] == HOSTILE
        assert gate["upstream_agent"] == "writer-bot" and gate["deadline"] and body["deadline"] == gate["deadline"]
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="No.", responder="bo"))
    assert (await handle.result()).action.value == "reject"


def test_a_wrong_kind_or_inbox_url_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("VICAR_WEBHOOK_KIND", "teams")
    with pytest.raises(InvalidInput, match="VICAR_WEBHOOK_KIND must be vicar, slack or cloudevents"):
        Settings.from_env()
    monkeypatch.setenv("VICAR_WEBHOOK_KIND", "Slack")
    monkeypatch.setenv("VICAR_INBOX_URL", "ftp://inbox")
    with pytest.raises(InvalidInput, match="VICAR_INBOX_URL must be an http"):
        Settings.from_env()
    monkeypatch.setenv("VICAR_INBOX_URL", f"{INBOX}/")
    s = Settings.from_env()
    assert (s.webhook_kind, s.inbox_url) == ("slack", INBOX)
