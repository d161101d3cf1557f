"""A gate's outcome lookup and its model's pin are one local activity (issue 49, item 2):
one dispatch fewer per gate under the turn; a second run of a recorded gate id still
returns the recorded answer without consulting; a pin that fails leaves the lookup to
decide alone and the gate to the human, as a failing pin did before."""

from __future__ import annotations

import asyncio
import json
import uuid

from temporalio.common import WorkflowIDReusePolicy

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.memory.registry import MemoryRegistry
from vicar.models import GateResult, HumanAnswer, ModelPin
from vicar.proxy.offline import OfflinePredictor

from .conftest import VicarHarness, wait_escalated


async def local_activities(handle) -> list[str]:
    """The local activities a gate ran, in order, from their markers in its history."""
    out = []
    async for event in handle.fetch_history_events():
        marker = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and marker.marker_name == "core_local_activity":
            data = marker.details["data"].payloads[0].data
            out.append(json.loads(data)["activity_type"])  # the SDK's own marker (not sealed)
    return out


async def test_a_gate_looks_up_and_pins_in_one_local_activity(harness):
    h = harness
    p = h.principal()
    req = h.request(p, task_type="docs", escalation_mode="never", artifact="Fix a typo.")
    handle = await start_gate(h.client, req, h.task_queue)
    first = await handle.result()
    ran = await local_activities(handle)
    assert ran[:2] == [c.REQUEST_TURN, c.LOOK_UP_AND_PIN] and c.CONSULT in ran and c.RECORD_OUTCOME in ran, ran
    assert c.RECORDED_OUTCOME not in ran and c.PIN_MODEL not in ran, ran

    # The same id started again: the recorded answer, from the lookup alone.
    again = await h.client.start_workflow(
        c.GATE_WORKFLOW,
        req,
        id=c.gate_workflow_id(req.gate_id),
        task_queue=h.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        result_type=GateResult,
    )
    second = await asyncio.wait_for(again.result(), 30)
    assert (second.action, second.text, second.n) == (first.action, first.text, first.n)
    assert await local_activities(again) == [c.REQUEST_TURN, c.LOOK_UP_AND_PIN, c.RELEASE_TURN]


class FailingPin(OfflinePredictor):
    """The offline predictor with a pin that always fails (a fit that cannot run)."""

    local = True

    def __init__(self, settings) -> None:
        super().__init__(settings.predictor)
        self.pins = 0

    def pin(self, principal: str) -> ModelPin:
        self.pins += 1
        raise RuntimeError("the model cannot be fitted")


async def test_a_failing_pin_sends_the_gate_to_the_human_with_its_n(temporal_env, embedder, settings):
    from vicar.worker import build_worker

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    predictor = FailingPin(settings)
    worker, _ = build_worker(
        temporal_env.client, settings, predictor=predictor, registry=registry, task_queue=task_queue
    )
    try:
        async with worker:
            h = VicarHarness(temporal_env.client, task_queue, registry, settings)
            p = h.principal()
            req = h.request(p, artifact="Add an index on users.email.")
            handle = await start_gate(h.client, req, h.task_queue)
            details = await wait_escalated(h.client, req.gate_id)
            assert "proxy unavailable" in details.calibration_note and "cannot be fitted" in details.calibration_note
            await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder="alice"))
            result = await handle.result()
            ran = await local_activities(handle)
    finally:
        registry.close()
    # The lookup with the pin failed (3 attempts, one marker), the lookup alone decided
    # (nothing recorded), the consult's own pin failed too (4 attempts).
    assert ran[:5] == [c.REQUEST_TURN, c.LOOK_UP_AND_PIN, c.RECORDED_OUTCOME, c.MATCH_RULES, c.PIN_MODEL], ran
    assert c.CONSULT not in ran and predictor.pins == 3 + 4
    assert result.answered_by.value == "human" and result.n == details.n  # recorded with the gate's own N
