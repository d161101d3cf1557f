"""Traces with decision provenance (docs/tracing.md): a real gate on the dev server, a
real worker in this process, spans caught by OpenTelemetry's in-memory exporter."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from vicar.client import add_rule
from vicar.client.gates import answer_gate, start_gate
from vicar.models import AnsweredBy, GateRequest, HumanAnswer
from vicar.runtime.tracing import tracing_interceptors

from .conftest import wait_escalated


@pytest.fixture
async def traced(temporal_env, embedder, settings):
    """A client and worker whose interceptors trace into memory."""
    from vicar.memory.registry import MemoryRegistry
    from vicar.worker import build_worker

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = temporal_env.client.config()
    config["interceptors"] = tracing_interceptors(provider)
    client = Client(**config)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(client, settings, registry=registry, task_queue=task_queue)
    async with worker:
        yield client, task_queue, exporter
    registry.close()


def gate_request(principal: str, task_type: str = "db-migration", artifact: str = "") -> GateRequest:
    return GateRequest(
        principal=principal,
        gate_id=f"g-{uuid.uuid4().hex[:12]}",
        state="PLAN_ASSERT",
        task_type=task_type,
        question="Approve the plan?",
        artifact_text=artifact,
    )


def spans_of(exporter: InMemorySpanExporter, gate_id: str) -> dict[str, list[ReadableSpan]]:
    """The spans of one gate's trace, by name."""

    def trace_of(span: ReadableSpan) -> int | None:
        return span.context.trace_id if span.context else None

    spans = exporter.get_finished_spans()
    answer = next(s for s in spans if s.name == "vicar.answer" and (s.attributes or {}).get("vicar.gate_id") == gate_id)
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        if trace_of(span) == trace_of(answer):
            out.setdefault(span.name, []).append(span)
    return out


async def test_a_gate_answered_by_the_human_is_traced_with_who_decided(traced):
    client, task_queue, exporter = traced
    req = gate_request(f"p-{uuid.uuid4().hex[:8]}", artifact="Add an index on users.email.")
    handle = await start_gate(client, req, task_queue)
    await wait_escalated(client, req.gate_id)
    await answer_gate(client, req.gate_id, HumanAnswer(action="correct", text="Lock time?", responder=req.principal))
    assert (await handle.result()).answered_by is AnsweredBy.human

    spans = spans_of(exporter, req.gate_id)
    # Temporal's spans: the client's start, the gate's run, its activities; all one trace.
    assert "StartWorkflow:VicarGate" in spans and "RunWorkflow:VicarGate" in spans, sorted(spans)
    consult = spans["RunActivity:consult"][0].attributes
    assert consult["vicar.gate_id"] == req.gate_id and consult["vicar.autonomous"] is False
    assert consult["vicar.guard"] and consult["vicar.decision"] == "escalated"
    escalation = spans["vicar.escalation"][0].attributes
    assert escalation["vicar.guard"] == consult["vicar.guard"]
    answer = spans["vicar.answer"][0].attributes
    assert answer["vicar.decided_by"] == "human" and answer["vicar.action"] == "correct"
    assert answer["vicar.escalated"] is True
    assert spans["RunActivity:record_outcome"][0].attributes["vicar.decided_by"] == "human"
    # Only ids, names and numbers: never the artifact or the person's words.
    every_value = [str(v) for ss in spans.values() for s in ss for v in (s.attributes or {}).values()]
    assert not any("users.email" in v or "Lock time" in v for v in every_value)


async def test_a_rule_answer_names_the_rule(traced):
    client, task_queue, exporter = traced
    p = f"p-{uuid.uuid4().hex[:8]}"
    await add_rule(
        client, p, dict(name="docs-ok", effect="approve", task_types=["docs"]), by="dana", task_queue=task_queue
    )
    req = gate_request(p, task_type="docs", artifact="Fix a typo.")
    handle = await start_gate(client, req, task_queue)
    assert (await handle.result()).answered_by is AnsweredBy.rule
    answer = spans_of(exporter, req.gate_id)["vicar.answer"][0].attributes
    assert answer["vicar.decided_by"] == "rule" and answer["vicar.rule"] == "docs-ok"
    assert answer["vicar.escalated"] is False


def test_tracing_is_off_unless_an_endpoint_is_configured():
    code = (
        "from vicar.runtime.tracing import tracing_interceptors as t; import sys; "
        "print(len(t()), 'opentelemetry.sdk.trace' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert off.stdout.split() == ["0", "False"]
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert on.stdout.split() == ["2", "True"]
    env["OTEL_SDK_DISABLED"] = "true"
    disabled = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert disabled.stdout.split() == ["0", "False"]
