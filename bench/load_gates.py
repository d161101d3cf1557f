"""Driving one gate of the load bench (bench/load_bench.py): the plan of gates, the
duplicate answers sent at once, and the loop that sees a gate to its result through
worker kills."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from tests.test_soak import retrying
from vicar import contracts as c
from vicar.client.gates import start_gate
from vicar.errors import VicarError
from vicar.models import GateDetails, GateRequest, GateResult, GateStatus, HumanAnswer

TASKS = {"docs": "approve", "db-migration": "correct", "refactor": "approve", "infra": "reject"}
POLL_SECONDS = 0.5
# Answers go out on the tick of a shared clock, so the gates that wait at the same time
# (many per principal) are answered at once, as several reviewers would.
ANSWER_TICK_SECONDS = 1.0


@dataclass
class Timing:
    started: float = 0.0  # client clock, just before the start call
    escalated_at: float | None = None  # the gate's own escalated_at (workflow time)
    answered: float | None = None  # client clock, the first answer's send
    closed: float | None = None  # the workflow's close time
    accepted: int = 0  # `respond` updates that succeeded: must be at most one


def plan(i: int, principals: int) -> tuple[GateRequest, HumanAnswer]:
    principal = f"load-{i % principals:02d}"
    task_type = list(TASKS)[(i // principals) % len(TASKS)]
    req = GateRequest(
        principal=principal,
        gate_id=f"load-{i:04d}",
        state="PLAN_ASSERT",
        task_type=task_type,
        question=f"Approve the {task_type} plan?",
        artifact_text=f"{task_type} change number {i}",
        escalation_mode="always",
    )
    action = TASKS[task_type]
    return req, HumanAnswer(action=action, text=f"{action}: gate {i}", responder=principal)


async def answer_all_at_once(
    clients: list[Client], workflow_id: str, answer: HumanAnswer, n: int, timing: Timing
) -> None:
    """The same answer `n` times at once: updates and signals in turn, over the clients."""

    async def one(k: int) -> None:
        handle = clients[k % len(clients)].get_workflow_handle(workflow_id)
        try:
            if k % 2 == 0:
                await asyncio.wait_for(handle.execute_update("respond", answer, result_type=str), 30)
                timing.accepted += 1
            else:
                await asyncio.wait_for(handle.signal("human_response", answer), 30)
        except (TimeoutError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
            pass  # another answer came first, or no worker right now: the caller looks again

    await asyncio.gather(*(one(k) for k in range(n)))


async def drive(clients: list[Client], req: GateRequest, answer: HumanAnswer, n: int, timing: Timing) -> GateResult:
    """Start the gate and see it to its result through worker kills (every call retried;
    whenever it waits for the human, the answer goes out `n` times at once)."""
    client = clients[0]

    async def start():
        try:
            await start_gate(client, req)
        except VicarError:  # started by an earlier attempt whose reply was lost
            pass

    timing.started = time.time()
    await retrying(start, f"start {req.gate_id}")
    handle = client.get_workflow_handle(c.gate_workflow_id(req.gate_id), result_type=GateResult)
    while True:
        desc = await retrying(handle.describe, f"describe {req.gate_id}")
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            timing.closed = desc.close_time.timestamp()
            return await retrying(handle.result, f"result {req.gate_id}")
        if desc.status != WorkflowExecutionStatus.RUNNING:
            raise AssertionError(f"{req.gate_id}: {desc.status}")
        try:
            details = await asyncio.wait_for(handle.query("details", result_type=GateDetails), timeout=10)
        except (TimeoutError, RPCError, WorkflowQueryFailedError):
            details = None  # no worker to answer the query right now, or a workflow task that fails
        if details is not None and details.status is GateStatus.escalated:
            if timing.escalated_at is None and details.escalated_at is not None:
                timing.escalated_at = details.escalated_at.timestamp()
            await asyncio.sleep(ANSWER_TICK_SECONDS - time.time() % ANSWER_TICK_SECONDS)
            if timing.answered is None:
                timing.answered = time.time()
            await answer_all_at_once(clients, handle.id, answer, n, timing)
        await asyncio.sleep(POLL_SECONDS)
