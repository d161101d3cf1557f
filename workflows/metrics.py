"""Vicar's workflow metrics (the gate's), through the workflow's metric meter. Here, not
in workflows/gate/, because the worker's ops surface reads BUCKETS too, and the
container's health probe (python -m vicar.runtime.ops) should not load the gate.

`workflow.metric_meter()` is replay-safe (nothing is emitted while a workflow replays,
so a worker restart does not count old gates again) and reports through the worker's
SDK runtime: everything lands on the one Prometheus endpoint (vicar/runtime/ops.py). Durations
come from `workflow.now()`, the deterministic workflow clock.

Labels are the principal and the gate's state (both bounded: humans, the CfA states),
never the task type (free text) or the gate id. Per-principal autonomy is the share of
finished gates decided alone:

    sum by (principal) (rate(vicar_gates_decided_alone[1h]))
      / sum by (principal) (rate(vicar_gates_finished[1h]))

and `vicar_autonomy_threshold`, the lowest confidence the autonomy rule has proven safe
(absent until the rule has proven one).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

STARTED = "vicar_gates_started"
FINISHED = "vicar_gates_finished"
DECIDED_ALONE = "vicar_gates_decided_alone"
ESCALATED = "vicar_gates_escalated"
LATENCY = "vicar_gate_latency_seconds"
ESCALATION_AGE = "vicar_escalation_age_seconds"
AUTONOMY_THRESHOLD = "vicar_autonomy_threshold"

# Histogram buckets in seconds (the SDK's defaults are milliseconds): a gate the proxy
# decides takes well under a second to a few seconds with an LLM; a human takes
# minutes to days.
BUCKETS: dict[str, list[float]] = {
    LATENCY: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400],
    ESCALATION_AGE: [10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200, 604800],
}


def _labels(req) -> dict[str, str]:
    return {"principal": req.principal, "state": req.state.value}


def started(req) -> None:
    workflow.metric_meter().create_counter(STARTED, "Gates started", "1").add(1, _labels(req))


def escalated(req) -> None:
    workflow.metric_meter().create_counter(ESCALATED, "Gates sent to the human", "1").add(1, _labels(req))


def finished(req, result, escalated_at: datetime | None) -> None:
    meter, labels, now = workflow.metric_meter(), _labels(req), workflow.now()
    meter.create_counter(FINISHED, "Gates finished", "1").add(1, labels)
    meter.create_histogram_float(LATENCY, "Gate start to finish", "s").record(
        max(0.0, (now - workflow.info().workflow_start_time).total_seconds()), labels
    )
    if result.escalated:
        if escalated_at is not None:
            meter.create_histogram_float(ESCALATION_AGE, "Time an escalated gate waited for the human", "s").record(
                max(0.0, (now - escalated_at).total_seconds()), labels
            )
    else:
        meter.create_counter(DECIDED_ALONE, "Gates the proxy answered alone", "1").add(1, labels)
    if result.autonomy_threshold is not None:
        meter.create_gauge_float(AUTONOMY_THRESHOLD, "Confidence the autonomy rule has proven safe", "1").set(
            result.autonomy_threshold, {"principal": req.principal}
        )
