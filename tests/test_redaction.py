"""Secrets never enter logs: a real webhook delivery with a token in its URL, logged by
the worker in this process (caplog) and by a real `python -m vicar.worker` (its stderr)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vicar.client.gates import start_gate
from vicar.models import GateRequest
from vicar.runtime.logging_redact import redact

ROOT = Path(__file__).resolve().parents[1]


class Hook:
    """A webhook receiver on loopback that records each POST's path and query."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                hook.paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.server.shutdown()


def secret_url(port: int) -> tuple[str, list[str]]:
    token, password = f"tok{uuid.uuid4().hex}", f"pw{uuid.uuid4().hex}"
    return f"http://hooker:{password}@127.0.0.1:{port}/hook?token={token}", [token, password]


def gate(task_queue_tag: str) -> GateRequest:
    return GateRequest(
        principal=f"p-{uuid.uuid4().hex[:8]}",
        gate_id=f"g-{task_queue_tag}-{uuid.uuid4().hex[:8]}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve the plan?",
        escalation_mode="always",
    )


async def until(predicate, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "the webhook was never called"
        await asyncio.sleep(0.1)


async def test_the_webhook_token_never_reaches_the_worker_log(temporal_env, embedder, settings, hook, caplog):
    from vicar.memory.registry import MemoryRegistry
    from vicar.worker import build_worker, configure_logging

    url, secrets = secret_url(hook.port)
    settings = settings.model_copy(update={"webhook_url": url})
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    caplog.set_level(logging.INFO)
    configure_logging()  # what the worker does at start: its handlers get the redaction
    try:
        async with worker:
            handle = await start_gate(temporal_env.client, gate("inproc"), task_queue)
            await until(lambda: hook.paths, 60)
            await handle.cancel()
    finally:
        registry.close()
        from vicar.runtime.logging_redact import uninstall

        uninstall()
    # The delivery happened with the token (the receiver saw it), and was logged...
    assert any(secrets[0] in p for p in hook.paths)
    requests = [r for r in caplog.records if r.name == "httpx" and "/hook" in r.getMessage()]
    assert requests, "httpx logged no request"
    # ... without the token or the password, in the records and the captured text.
    for secret in secrets:
        assert secret not in caplog.text
        assert all(secret not in r.getMessage() for r in caplog.records)


async def test_a_worker_process_logs_no_webhook_token(temporal_env, settings, hook, worker_process):
    url, secrets = secret_url(hook.port)
    worker = worker_process(settings.data_dir, VICAR_WEBHOOK_URL=url)
    await worker.start()
    try:
        handle = await start_gate(temporal_env.client, gate("proc"), worker.task_queue)
        await until(lambda: hook.paths, 120)
        await handle.cancel()
        await asyncio.sleep(1)  # the cancellation's own log lines
    finally:
        log = await worker.stop(timeout=60)
    assert any(secrets[0] in p for p in hook.paths)
    assert "httpx" in log and "/hook?[redacted]" in log, log[-2000:]
    for secret in secrets:
        assert secret not in log, log[-2000:]


def test_redaction_covers_credentials_in_every_shape():
    line = (
        "POST https://u:hunter2pass@h.example/x?api_key=abc&sig=def "
        "{'authorization': 'Bearer sk-ant-0123456789abcdefABCDEF', 'x-api-key': 'k-9f8e7d6c'} "
        "Authorization: Basic dXNlcjpwYXNz key sk-proj-ABCDEFGHIJKLMNOPQRST and token=xyz123"
    )
    out = redact(line, ["very-secret-value"])
    for secret in (
        "hunter2pass",
        "abc&sig",
        "def",
        "sk-ant-0123456789",
        "k-9f8e7d6c",
        "dXNlcjpwYXNz",
        "sk-proj-ABCDEFGHIJKLMNOPQRST",
        "xyz123",
    ):
        assert secret not in out, (secret, out)
    assert "h.example/x" in out and "POST" in out  # what is not secret stays readable
    assert redact("the value very-secret-value here", ["very-secret-value"]) == "the value [redacted] here"


def test_a_librarys_own_handler_is_covered_too(monkeypatch):
    """OPENAI_LOG=debug gives the openai logger a handler of its own, beside the root's."""
    import io

    from vicar.runtime.logging_redact import install, uninstall

    monkeypatch.setenv("OPENAI_API_KEY", "k-" + uuid.uuid4().hex)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    library = logging.getLogger("openai")
    library.addHandler(handler)
    library.setLevel(logging.DEBUG)
    try:
        install()
        library.debug(
            "Request options: %s",
            {
                "headers": {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
                "url": "https://api.example/v1?key=abc123",
            },
        )
        library.debug("retrying with key %s", os.environ["OPENAI_API_KEY"])
    finally:
        uninstall()
        library.removeHandler(handler)
        library.setLevel(logging.NOTSET)
    written = stream.getvalue()
    assert "Request options" in written and "retrying with key [redacted]" in written
    assert os.environ["OPENAI_API_KEY"] not in written and "abc123" not in written
