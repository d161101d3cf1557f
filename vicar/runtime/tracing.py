"""Traces with decision provenance (docs/tracing.md): Temporal's OpenTelemetry
interceptor gives the gate, its activities and the client's calls their spans; Vicar's
own interceptor adds who decided and under what to the spans of the activities where a
decision is made (the consult, the answer's record), and a short span of its own for
each decision: `vicar.decision` once per gate, wherever it was decided (the proxy at its
consult; a rule, the person or the deadline when the answer is recorded), naming who
(`vicar.decided_by`, and the person as `vicar.responder`, the rule as `vicar.rule`).
Every span gives the gate's id as the gate knows it (`vicar.gate_id`: `claude-code/ab12`,
never the workflow id's last segment).

Off unless OpenTelemetry's own variables configure an OTLP endpoint
(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with the exporter's
usual OTEL_* options), or a caller passes its own tracer provider (tests, embedding
applications). Only ids, names and numbers go on a span: never an artifact, an answer's
words or a memory.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
)
from temporalio.worker import (
    Interceptor as WorkerInterceptor,
)

from vicar.contracts import gate as c
from vicar.models import AnsweredBy, Calibration, OutcomeRecord

if TYPE_CHECKING:  # OpenTelemetry is imported only when tracing is on: commands start faster
    from opentelemetry import trace

SERVICE_NAME = "vicar"
# Who decided, in the words of the docs: a gate nobody answered ended at its deadline.
DECIDERS = {
    AnsweredBy.human: "human",
    AnsweredBy.proxy: "proxy",
    AnsweredBy.rule: "rule",
    AnsweredBy.nobody: "deadline",
}

_installed: trace.TracerProvider | None = None
_install_lock = threading.Lock()


def configured() -> bool:
    """An OTLP endpoint is set and the SDK is not disabled (OpenTelemetry's conventions)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""
    )
    return bool(endpoint.strip())


def exporting_provider() -> trace.TracerProvider | None:
    """The process's tracer provider exporting over OTLP, made once when configured."""
    global _installed
    if not configured():
        return None
    with _install_lock:
        if _installed is None:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _installed = provider
        return _installed


def flush(timeout_millis: int = 2000) -> None:
    """Send the spans batched for export, waiting at most `timeout_millis` (an unreachable
    collector must not hold a command's exit)."""
    if _installed is not None:
        _installed.force_flush(timeout_millis)  # type: ignore[attr-defined]


def tracing_interceptors(provider: trace.TracerProvider | None = None) -> list[Any]:
    """The client's interceptors for tracing ([] when tracing is off). Given on the
    client, they apply to the workers built on it as well."""
    provider = provider or exporting_provider()
    if provider is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    tracer = provider.get_tracer(SERVICE_NAME)
    return [TracingInterceptor(tracer), DecisionInterceptor(tracer)]


def calibration_attributes(cal: Calibration) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "vicar.guard": cal.guard,
        "vicar.autonomous": cal.autonomous,
        "vicar.confidence": cal.confidence,
        "vicar.evidence": cal.evidence,
    }
    optional = {
        "vicar.score": cal.score,
        # On the confidence's scale, as every surface shows it; the score's own beside it.
        "vicar.threshold": cal.threshold_shown,
        "vicar.score_threshold": cal.threshold,
        "vicar.supported": cal.supported,
        "vicar.bound": cal.bound,
        "vicar.target_error": cal.target,
        "vicar.rule": cal.rule,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    return attrs


def provenance(activity_type: str, args: list[Any], result: Any) -> tuple[str, dict[str, Any]] | None:
    """(span name, attributes) of the decision an activity made, or None."""
    if activity_type == c.CONSULT and isinstance(result, c.ConsultResult) and result.calibration:
        cal = result.calibration
    elif activity_type == c.CALIBRATE and isinstance(result, Calibration):
        cal = result  # the step-by-step path's decision
    elif activity_type == c.RECORD_OUTCOME and args and isinstance(args[0], OutcomeRecord):
        return "vicar.answer", answer_attributes(args[0])
    else:
        return None
    decided = "rule" if cal.rule and cal.autonomous else "proxy" if cal.autonomous else "escalated"
    attrs = {"vicar.decision": decided, **calibration_attributes(cal)}
    if cal.autonomous:
        attrs["vicar.decided_by"] = decided
    return ("vicar.decision" if cal.autonomous else "vicar.escalation"), attrs


def answer_attributes(record: OutcomeRecord) -> dict[str, Any]:
    """The recorded answer: who decided (the person by their name), what, under what."""
    decided_by = DECIDERS.get(record.answered_by, record.answered_by.value)
    attrs: dict[str, Any] = {
        "vicar.gate_id": record.request.gate_id,
        "vicar.principal": record.request.principal,
        "vicar.decided_by": decided_by,
        "vicar.decision": decided_by,
        "vicar.action": record.action.value,
        "vicar.escalated": record.escalated_at is not None,
        "vicar.cancelled": record.cancelled,
    }
    if record.responder and record.answered_by is AnsweredBy.human:
        attrs["vicar.responder"] = record.responder  # a name, as the gate records it: never words
    elif record.responder and record.answered_by is AnsweredBy.rule:
        attrs["vicar.rule_author"] = record.responder
    if record.calibration:
        attrs.update(calibration_attributes(record.calibration))
        attrs["vicar.decision"] = decided_by  # the answer's, not the consult's escalation
    return attrs


def decided_at_record(activity_type: str, args: list[Any]) -> bool:
    """Whether this activity records a decision no consult span has told of: a rule's, the
    person's, the deadline's (the proxy's own was told at its consult)."""
    if activity_type != c.RECORD_OUTCOME or not args or not isinstance(args[0], OutcomeRecord):
        return False
    return args[0].answered_by is not AnsweredBy.proxy


class DecisionInterceptor(ClientInterceptor, WorkerInterceptor):
    """Adds the decision's provenance to the activity's span (the Temporal interceptor's,
    which must come first in the list) and records a span of Vicar's own beneath it."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _DecisionInbound(next, self.tracer)


class _DecisionInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracer: trace.Tracer) -> None:
        super().__init__(next)
        self.tracer = tracer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await super().execute_activity(input)
        try:
            info = activity.info()
            found = provenance(info.activity_type, list(input.args), result)
            if found:
                name, attrs = found
                attrs.setdefault("vicar.gate_id", gate_id_of(info.workflow_id))
                from opentelemetry import trace

                trace.get_current_span().set_attributes(attrs)
                self.tracer.start_span(name, attributes=attrs).end()
                if decided_at_record(info.activity_type, list(input.args)):
                    self.tracer.start_span("vicar.decision", attributes=attrs).end()
        except Exception:  # a trace must never fail the activity whose result is in hand
            pass
        return result


def gate_id_of(workflow_id: str | None) -> str:
    """The gate id inside a gate's workflow id (`vicar-gate/<gate id>`, and a gate id may
    hold a slash: `vicar-gate/claude-code/ab12` is `claude-code/ab12`)."""
    return (workflow_id or "").removeprefix(c.gate_workflow_id(""))
