"""Temporal's floor for the gate, run the way the gate bench runs gates: workflows that do
nothing but Temporal work (bench/floor_workflow.py), sequentially and per principal
concurrently, so a gate's figures can be read against them."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from rich.progress import Progress
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from bench.floor_workflow import FloorGateInput, FloorGateWorkflow, FloorWorkflow
from bench.gate_common import Row, eagerly_started
from vicar.models import CfAState, GateStatus
from vicar.workflows import search_attributes as sa

BASELINE_WARMUP = 10


async def baseline(client: Client, tq: str, n: int, local_activities: int, label: str, progress: Progress) -> Row:
    row = Row(label)
    bar = progress.add_task(label, total=BASELINE_WARMUP + n)
    for i in range(BASELINE_WARMUP + n):
        t0 = time.perf_counter()
        handle = await client.start_workflow(
            FloorWorkflow.run,
            local_activities,
            id=f"bench-floor-{uuid.uuid4().hex}",
            task_queue=tq,
            request_eager_start=True,
        )
        await handle.result()
        if i >= BASELINE_WARMUP:
            row.total += 1
            row.eager += eagerly_started(handle)
            row.latencies.append(time.perf_counter() - t0)
            row.ids.append(handle.id)
        progress.advance(bar)
    return row


@dataclass(frozen=True)
class FloorGate:
    """A floor gate with the brain's turn protocol: `steps` no-op local activities after
    the turn; `full`: also the pin step, the gate's search attributes at start and the
    done-status upsert (the real gate's whole structure)."""

    full: bool


# The concurrent baselines: BenchFloor with this many no-op local activities, or a floor gate.
FloorShape = int | FloorGate


async def start_floor(client: Client, tq: str, shape: FloorShape, brain_id: str) -> WorkflowHandle:
    wid = f"bench-floor-{uuid.uuid4().hex}"
    if isinstance(shape, FloorGate):
        attributes = (
            TypedSearchAttributes(
                [
                    SearchAttributePair(sa.STATUS, GateStatus.queued.value),
                    SearchAttributePair(sa.PRINCIPAL, brain_id),
                    SearchAttributePair(sa.STATE, CfAState.PLAN_ASSERT.value),
                    SearchAttributePair(sa.TASK_TYPE, "bench"),
                ]
            )
            if shape.full
            else None
        )
        return await client.start_workflow(
            FloorGateWorkflow.run,
            FloorGateInput(brain_id, steps=3 if shape.full else 2, done_status=shape.full),
            id=wid,
            task_queue=tq,
            request_eager_start=True,
            search_attributes=attributes,
        )
    return await client.start_workflow(FloorWorkflow.run, shape, id=wid, task_queue=tq, request_eager_start=True)


async def concurrent_baseline(
    client: Client,
    tq: str,
    principals: list[str],
    run: str,
    per: int,
    shape: FloorShape,
    label: str,
    progress: Progress,
) -> Row:
    """`per` floor workflows per principal, the principals concurrently, each one's in turn
    (the concurrent gate phase's pattern). The floor gates of a principal share its brain."""
    row = Row(label)
    bar = progress.add_task(label, total=per * len(principals))

    async def stream(p: str) -> None:
        for _ in range(per):
            t0 = time.perf_counter()
            handle = await start_floor(client, tq, shape, f"bench-floor-brain/{run}/{p}")
            await handle.result()
            row.total += 1
            row.eager += eagerly_started(handle)
            row.latencies.append(time.perf_counter() - t0)
            row.ids.append(handle.id)
            progress.advance(bar)

    t0 = time.perf_counter()
    await asyncio.gather(*(stream(p) for p in principals))
    row.wall = time.perf_counter() - t0
    return row
