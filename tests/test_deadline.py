"""A gate's deadline and the webhook: nobody answers, the gate ends timed_out with the
proxy's guess, and a local HTTP receiver is told of the escalation and of the deadline
(retried through its failures). A cancelled gate says so in VicarStatus."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import is_cancelled_exception

from vicar.client.gates import start_gate
from vicar.models import AnsweredBy, GateRequest, GateStatus
from vicar.workflows import search_attributes as sa

from .conftest import wait_escalated


class Receiver:
    """A webhook receiver on loopback that fails its first `fail_first` POSTs with 503."""

    def __init__(self, fail_first: int) -> None:
        self.posts: list[tuple[dict, str]] = []  # (body, Idempotency-Key), every attempt
        self.fail_first = fail_first
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.posts.append((body, self.headers.get("Idempotency-Key", "")))
                self.send_response(503 if len(received.posts) <= received.fail_first else 204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/vicar"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[str]:
        """The events the receiver accepted (one per notice, retries not counted)."""
        return [body["event"] for i, (body, _) in enumerate(self.posts) if i >= self.fail_first]


@pytest.fixture
def receiver():
    r = Receiver(fail_first=1)
    yield r
    r.server.shutdown()


@contextlib.asynccontextmanager
async def webhook_worker(temporal_env, embedder, settings, url: str):
    """A worker (in-process) whose webhook is `url`: its task queue."""
    from vicar.memory.registry import MemoryRegistry
    from vicar.worker import build_worker

    settings = settings.model_copy(update={"webhook_url": url})
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    try:
        async with worker:
            yield task_queue
    finally:
        registry.close()


def plan_gate(**fields) -> GateRequest:
    """A migration plan that always goes to the person."""
    return GateRequest(
        principal=f"p-{uuid.uuid4().hex[:8]}",
        gate_id=f"g-{uuid.uuid4().hex[:8]}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve the plan?",
        escalation_mode="always",
        **fields,
    )


async def test_a_gate_nobody_answers_times_out_and_the_webhook_is_told(temporal_env, embedder, settings, receiver):
    req = plan_gate(deadline_seconds=4)
    async with webhook_worker(temporal_env, embedder, settings, receiver.url) as task_queue:
        handle = await start_gate(temporal_env.client, req, task_queue)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.timed_out and result.escalated
    assert (result.action.value, result.answered_by, result.responder) == ("hold", AnsweredBy.nobody, None)
    assert result.text.startswith("No answer by the deadline") and "The proxy's guess" in result.text
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(sa.STATUS) == GateStatus.timed_out.value
    # The first POST failed (503) and was retried with the same idempotency key.
    assert receiver.events() == ["escalated", "timed_out"]
    first, retried = receiver.posts[0], receiver.posts[1]
    assert first == retried and first[1] == f"{handle.id}/escalated"
    notice = receiver.posts[-1][0]
    assert notice["gate"]["gate_id"] == req.gate_id and notice["gate"]["question"] == req.question
    assert notice["deadline"] is not None


async def test_a_cancelled_gate_says_so_in_its_status(harness):
    h = harness
    req = h.request(h.principal(), escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await handle.cancel()
    with pytest.raises(Exception):
        await handle.result()
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(sa.STATUS) == GateStatus.cancelled.value


def test_the_webhook_and_deadline_settings_are_checked(monkeypatch):
    from vicar.errors import InvalidInput
    from vicar.settings import DEFAULT_GATE_DEADLINE_SECONDS, Settings

    assert Settings.from_env().gate_deadline_seconds == DEFAULT_GATE_DEADLINE_SECONDS
    monkeypatch.setenv("VICAR_WEBHOOK_URL", "ftp://example.org/hook")
    with pytest.raises(InvalidInput, match="must be an http"):
        Settings.from_env()
    # A refused URL's token must not reach the error line (it is printed and logged).
    monkeypatch.setenv("VICAR_WEBHOOK_URL", "ftp://user:pw@example.org/hook?token=s3cret")
    with pytest.raises(InvalidInput) as refused:
        Settings.from_env()
    assert "s3cret" not in str(refused.value) and "pw" not in str(refused.value)
    monkeypatch.setenv("VICAR_WEBHOOK_URL", "https://hooks.example.org/vicar?token=s3cret")
    monkeypatch.setenv("VICAR_GATE_DEADLINE_SECONDS", "3600")
    s = Settings.from_env()
    assert s.webhook_url.startswith("https://hooks.example.org") and s.gate_deadline_seconds == 3600
    monkeypatch.setenv("VICAR_GATE_DEADLINE_SECONDS", "soon")
    with pytest.raises(InvalidInput, match="must be a number"):
        Settings.from_env()


async def test_a_gate_cancelled_while_its_escalation_is_being_told_ends_cancelled(temporal_env, embedder, settings):
    """The webhook keeps failing, so the escalation notice is still retrying when the gate
    is cancelled: the cancellation reaches the gate (it used to be taken for the notice's
    failure, logged, and the gate went on waiting for the human for its whole deadline)."""
    down = Receiver(fail_first=10**6)
    req = plan_gate()
    try:
        async with webhook_worker(temporal_env, embedder, settings, down.url) as task_queue:
            handle = await start_gate(temporal_env.client, req, task_queue)
            for _ in range(300):  # the notice has been tried (and refused) at least once
                if down.posts:
                    break
                await asyncio.sleep(0.1)
            assert down.posts, "the escalation notice never reached the receiver"
            await handle.cancel()
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), 60)
            assert is_cancelled_exception(failed.value.cause)
    finally:
        down.server.shutdown()
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(sa.STATUS) == GateStatus.cancelled.value
