"""What the gate bench and the benches built on it share: its settings (the loosened
autonomy rule, the gate's shape), the worker's memory and predictor, the phases' progress
bar, the measured row, the activity timer and the figures' formatting."""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.client import WorkflowHandle
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput
from temporalio.worker import Interceptor as WorkerInterceptor

from vicar.memory.embedder import Embedder, make_embedder
from vicar.memory.registry import MemoryRegistry
from vicar.proxy.provider import Predictor
from vicar.proxy.select import predictor_from_env
from vicar.settings import Settings

# Training gates per principal at most before the bench gives up on it (-1 in the report).
MAX_TRAINING_GATES = 12
# An autonomous gate's local activities with a local predictor: request_turn, pin_model,
# consult (retrieval, both passes, surprise, calibration, reinforcement in one step),
# record_outcome (which also gives the turn back).
GATE_LOCAL_ACTIVITIES = 4
# The brain's own local activities: they run inside request_turn's time, so not summed again.
BRAIN_ACTIVITIES = frozenset({"advance_turn", "mirror_counter", "read_counter"})
# Seconds before a measured gate is checked for escalation: well above an autonomous gate's
# latency, so the bench never queries those (a query costs work that slows the other gates).
MEASURE_POLL = 3.0
# The bench measures speed, not fidelity: the autonomy rule is loosened (as in
# tests/test_multiworker.py) so principals earn autonomy within a few answers and no
# gate is audited at random; the earned-autonomy rule's own figures are in the replay.
BENCH_ENV = {"VICAR_AUTONOMY_TARGET_ERROR": "0.8", "VICAR_AUTONOMY_AUDIT_SHARE": "0"}


def proxy_parts(settings: Settings) -> tuple[Embedder, MemoryRegistry, Predictor]:
    """The embedder, memory and predictor a worker builds from these settings, made once so
    that several workers (or a direct call outside any worker) share them; the caller
    closes the registry."""
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    return embedder, registry, predictor_from_env(settings, registry)


def phase_progress(console: Console) -> Progress:
    """One bar per phase: its label, its gates done of all, the time it has taken."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


@dataclass
class Row:
    label: str
    latencies: list[float] = field(default_factory=list)  # seconds, counted gates only
    escalated: int = 0
    eager: int = 0
    total: int = 0
    wall: float | None = None  # seconds, throughput phase only
    ids: list[str] = field(default_factory=list)  # gate ids, parallel to latencies
    cpu: tuple[float, float] = (math.nan, math.nan)  # CPU seconds: this process, the server

    def pct(self, q: int) -> float:
        return (
            statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000
            if len(self.latencies) > 1
            else self.mean
        )

    @property
    def mean(self) -> float:
        return statistics.fmean(self.latencies) * 1000 if self.latencies else math.nan

    @property
    def rate(self) -> float | None:
        return self.total / self.wall if self.wall else None

    def cpu_ms(self, which: int) -> float:
        return self.cpu[which] * 1000 / self.total if self.total else math.nan


def cpu_seconds(pid: int | str) -> float:
    """utime + stime of a process, from /proc (Linux); NaN elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


class ActivityTimer(ClientInterceptor, WorkerInterceptor):
    """Wall time per activity name (local ones included), to show where a gate's time goes.
    On the client so the worker built from it picks it up: build_worker takes no interceptors."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.enabled = False

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        timer = self

        class Timed(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                t0 = time.perf_counter()
                try:
                    return await self.next.execute_activity(input)
                finally:
                    if timer.enabled:
                        timer.samples[input.fn.__name__].append(time.perf_counter() - t0)

        return Timed(next)


def breakdown(timer: ActivityTimer, gates: int) -> list[tuple[str, float, int]]:
    """(activity, mean ms per counted gate, calls) for the sequential when_unsure phase."""
    return sorted(((name, sum(v) * 1000 / gates, len(v)) for name, v in timer.samples.items()), key=lambda t: -t[1])


def eagerly_started(handle: WorkflowHandle) -> bool:
    # Private SDK flag; the bench only reports it, so a missing one reads as False.
    return bool(getattr(handle, "__temporal_eagerly_started", False))
