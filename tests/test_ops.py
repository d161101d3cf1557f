"""The worker's operational surface (vicar/runtime/ops.py) on a real worker process against the
real Temporal dev server: probes, the SDK's Prometheus endpoint with Vicar's gate
metrics, and a graceful shutdown that lets a running activity finish."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.errors import Conflict, InvalidInput
from vicar.models import AnsweredBy, GateRequest, HumanAnswer
from vicar.runtime.server import free_port
from vicar.settings import Settings

from .conftest import WorkerProcess, let_test_responders_in, wait_escalated
from .conftest import http_get as get
from .llm_standins import AnthropicStandIn
from .test_llm_gate import APPROVE, Reviewer

ROOT = Path(__file__).resolve().parents[1]


def gate(principal: str, mode: str) -> GateRequest:
    return GateRequest(
        principal=principal,
        gate_id=f"ops-{uuid.uuid4().hex[:10]}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve the plan?",
        escalation_mode=mode,
    )


async def test_probes_and_metrics_of_a_real_worker(temporal_env, settings):
    w = WorkerProcess(temporal_env, settings.data_dir)
    await w.start()
    try:
        await w.until("/healthz", 200)
        ready = json.loads(await w.until("/readyz", 200))
        assert ready == {"ready": True, "temporal": True, "polling": True, "model_loaded": True, "shutting_down": False}
        # The container's HEALTHCHECK command, against this process's address.
        probe = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vicar.runtime.ops", "probe", "/readyz", env=w.env, cwd=str(ROOT)
        )
        assert await probe.wait() == 0
        assert (await w.get("/nope"))[0] == 404

        principal = f"ops-{uuid.uuid4().hex[:8]}"
        let_test_responders_in(settings.principals_dir, principal)
        alone = await (await start_gate(temporal_env.client, gate(principal, "never"), w.task_queue)).result()
        assert alone.answered_by is AnsweredBy.proxy
        asked = gate(principal, "always")
        handle = await start_gate(temporal_env.client, asked, w.task_queue)
        await wait_escalated(temporal_env.client, asked.gate_id)
        await answer_gate(
            temporal_env.client, asked.gate_id, HumanAnswer(action="approve", text="fine", responder="tester")
        )
        assert (await handle.result()).answered_by is AnsweredBy.human

        labels = f'principal="{principal}"'
        for _ in range(50):  # the exporter reads the SDK's meters as they are: no flush to wait for
            _, metrics = await w.get("/metrics")
            if f"vicar_escalation_age_seconds_count{{{labels}" in metrics:
                break
            await asyncio.sleep(0.1)
        lines = metrics.splitlines()

        def value(name: str) -> float:
            return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines if ln.startswith(name + "{") and labels in ln)

        assert value("vicar_gates_started") == 2 and value("vicar_gates_finished") == 2
        assert value("vicar_gates_decided_alone") == 1 and value("vicar_gates_escalated") == 1
        assert value("vicar_gate_latency_seconds_count") == 2
        assert value("vicar_escalation_age_seconds_count") == 1
        # The SDK runtime's own metrics on the same endpoint.
        assert any(ln.startswith("temporal_workflow_completed{") for ln in lines), metrics[:2000]
        assert any(
            ln.startswith("temporal_activity_execution_latency")
            or ln.startswith("temporal_local_activity_execution_latency")
            for ln in lines
        )
    finally:
        out = await w.stop()
    assert w.proc.returncode == 0, out[-2000:]
    assert "Traceback" not in out


async def test_shutdown_lets_a_running_activity_finish(temporal_env, settings):
    """SIGTERM while an LLM call is in flight: /readyz turns 503 at once, the call's
    activity completes (not cancelled), then the process exits cleanly."""
    in_flight, delay = threading.Event(), 4.0
    reviewer = Reviewer(first=APPROVE + "\nCONFIDENCE: 0.9")

    def slow_first(body: dict):
        if not in_flight.is_set():
            in_flight.set()
            time.sleep(delay)  # the stand-in's thread: the worker's activity waits on it
        return reviewer(body)

    standin = AnthropicStandIn(slow_first)
    w = WorkerProcess(
        temporal_env,
        settings.data_dir,
        VICAR_PREDICTOR="anthropic",
        ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key",
        ANTHROPIC_BASE_URL=standin.root,
        VICAR_SHUTDOWN_GRACE_SECONDS="30",
    )
    await w.start()
    try:
        await w.until("/readyz", 200)
        req = gate(f"ops-{uuid.uuid4().hex[:8]}", "never")
        handle = await start_gate(temporal_env.client, req, w.task_queue)
        deadline = time.monotonic() + 60
        while not in_flight.is_set():
            assert time.monotonic() < deadline, "the LLM call never came"
            await asyncio.sleep(0.05)
        stopped_at = time.monotonic()
        w.proc.send_signal(signal.SIGTERM)
        body = json.loads(await w.until("/readyz", 503, timeout=5))
        assert body["shutting_down"] and not body["ready"]
        assert (await w.get("/healthz"))[0] == 200  # alive while it drains
        out = await w.stop()
        assert w.proc.returncode == 0, out[-2000:]
        assert time.monotonic() - stopped_at >= delay - 1.0  # it waited for the call
        # The call in flight was the prior pass: its activity completed. (With a grace of
        # 0 s the SDK cancels it at once; the cancelled attempt fails and is retried.)
        events = [e async for e in handle.fetch_history_events()]
        passes = [
            e.event_id
            for e in events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name == c.PRIOR_PASS
        ]
        done = [
            e.activity_task_completed_event_attributes.scheduled_event_id
            for e in events
            if e.HasField("activity_task_completed_event_attributes")
        ]
        assert passes and passes[0] in done
        await handle.terminate("test over: no worker serves this queue any more")
    finally:
        standin.close()
        if w.proc.returncode is None:
            await w.stop()


@pytest.mark.parametrize(
    "var,raw",
    [
        ("VICAR_OPS_ADDRESS", "localhost:8080"),
        ("VICAR_OPS_ADDRESS", "0.0.0.0"),
        ("VICAR_METRICS_ADDRESS", "1.2.3.4:99999"),
        ("VICAR_SHUTDOWN_GRACE_SECONDS", "-1"),
        ("VICAR_SHUTDOWN_GRACE_SECONDS", "nan"),
        ("VICAR_SHUTDOWN_GRACE_SECONDS", "soon"),
    ],
)
def test_bad_ops_settings_are_one_line(monkeypatch, var, raw):
    monkeypatch.setenv(var, raw)
    with pytest.raises(InvalidInput, match=var):
        Settings.from_env()


def test_ops_settings_from_env(monkeypatch):
    assert Settings.from_env().ops.address is None  # off by default
    monkeypatch.setenv("VICAR_OPS_ADDRESS", "[::]:8080")
    monkeypatch.setenv("VICAR_METRICS_ADDRESS", "off")
    monkeypatch.setenv("VICAR_SHUTDOWN_GRACE_SECONDS", "45")
    ops = Settings.from_env().ops
    assert (ops.address, ops.metrics_address, ops.shutdown_grace_seconds) == ("[::]:8080", None, 45.0)


async def test_a_taken_port_stops_the_worker_in_one_line(temporal_env, settings):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for var in ("VICAR_OPS_ADDRESS", "VICAR_METRICS_ADDRESS"):
            w = WorkerProcess(temporal_env, settings.data_dir, **{var: f"127.0.0.1:{port}"})
            await w.start()
            out = (await asyncio.wait_for(w.proc.communicate(), timeout=90))[0].decode()
            assert w.proc.returncode == Conflict.exit_code, out
            assert out.strip().splitlines()[-1].startswith("error: cannot serve") and var in out
            assert "Traceback" not in out


async def test_the_ops_listener_before_the_worker_and_against_bad_requests():
    from vicar.runtime.ops import serving
    from vicar.settings import OpsParams

    address = f"127.0.0.1:{free_port()}"
    async with serving(OpsParams(address=address)) as surface:
        assert surface.runtime is None  # no metrics address: the SDK's default runtime
        assert await asyncio.to_thread(get, f"http://{address}/healthz") == (200, "ok\n")
        status, body = await asyncio.to_thread(get, f"http://{address}/readyz")
        assert status == 503 and json.loads(body)["model_loaded"] is False

        async def raw(data: bytes) -> bytes:
            reader, writer = await asyncio.open_connection(*address.split(":"))
            writer.write(data)
            await writer.drain()
            out = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return out

        assert (await raw(b"POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert await raw(b"GET /healthz HTTP/1.1\r\nX-Junk: " + b"a" * 20_000 + b"\r\n\r\n") == b""
        assert (await raw(b"\xff\xfe garbage\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert await asyncio.to_thread(get, f"http://{address}/healthz") == (200, "ok\n")  # still serving
