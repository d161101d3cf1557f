"""The brain: the per-principal interaction counter and FIFO turns."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateStage
from temporalio.worker import Worker

from vicar import contracts as c
from vicar.client.gates import start_gate
from vicar.models.brain import BrainConfig, BrainInput, BrainStatus, TurnReply, TurnRequest

from .conftest import DeafGate, wait_for


async def run_never_gates(h, principal: str, count: int, **kw):
    """Gates in `never` mode finish without a human, so only the brain paces them."""
    handles = await asyncio.gather(
        *(
            start_gate(
                h.client, h.request(principal, escalation_mode="never", artifact=f"change {i}", **kw), h.task_queue
            )
            for i in range(count)
        )
    )
    return await asyncio.gather(*(hd.result() for hd in handles))


async def brain_status(h, principal: str) -> BrainStatus:
    return await h.client.get_workflow_handle(c.brain_workflow_id(principal)).query("status", result_type=BrainStatus)


async def test_fifty_concurrent_gates_get_gap_free_increasing_n(harness):
    h = harness
    p = h.principal()
    results = await run_never_gates(h, p, 50)
    ns = sorted(r.n for r in results)
    assert ns == list(range(1, 51))
    # Each chunk's first trace is its gate's N: the order of storing follows the counter.
    chunks = h.registry.get(p).store.chunks()
    assert sorted(ch.created_n for ch in chunks) == list(range(1, 51))
    assert (await brain_status(h, p)).counter == 50
    assert h.registry.get(p).counter() == 50


@pytest.mark.parametrize("harness", [BrainConfig(max_grants_per_run=7)], indirect=True)
async def test_counter_survives_continue_as_new(harness):
    h = harness
    p = h.principal()
    first = await run_never_gates(h, p, 12)
    second = await run_never_gates(h, p, 12)
    assert sorted(r.n for r in first + second) == list(range(1, 25))

    async def brain_runs():  # visibility is eventually consistent
        found = [wf async for wf in h.client.list_workflows(f'WorkflowId = "{c.brain_workflow_id(p)}"')]
        return found if len(found) >= 3 else None  # 24 grants at 7 per run

    runs = await wait_for(brain_runs)
    assert sum(r.status == WorkflowExecutionStatus.CONTINUED_AS_NEW for r in runs) >= 2


async def test_counter_survives_brain_restart(harness):
    h = harness
    p = h.principal()
    first = await run_never_gates(h, p, 5)
    assert max(r.n for r in first) == 5
    brain = h.client.get_workflow_handle(c.brain_workflow_id(p))
    await brain.terminate(reason="test: the brain dies")
    # A new brain starts with no carried state and resumes from the stored counter.
    second = await run_never_gates(h, p, 3)
    assert sorted(r.n for r in second) == [6, 7, 8]


@pytest.mark.parametrize("harness", [BrainConfig(lease_seconds=2.0)], indirect=True)
async def test_turn_lease_expires_for_a_dead_holder(harness):
    h = harness
    p = h.principal()
    deaf_queue = f"deaf-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=deaf_queue, workflows=[DeafGate]):
        deaf = await h.client.start_workflow(DeafGate.run, id=f"deaf-{uuid.uuid4().hex[:8]}", task_queue=deaf_queue)
        await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=p, config=BrainConfig(lease_seconds=2.0)),
            id=c.brain_workflow_id(p),
            task_queue=h.task_queue,
            start_signal="request_turn",
            start_signal_args=[TurnRequest(gate_id="deaf", workflow_id=deaf.id)],
        )

        async def deaf_has_turn():
            return await deaf.query(DeafGate.has_turn)

        await wait_for(deaf_has_turn)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        result = await asyncio.wait_for(
            (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(),
            timeout=30,
        )
        waited = loop.time() - t0
        assert result.n == 2
        assert waited >= 1.0  # it had to wait for the lease, not take the turn at once
        await deaf.terminate()


async def test_repeated_turn_request_hands_out_no_new_n(harness):
    """An activity retry re-sends request_turn: the brain neither queues it twice nor
    hands out a second N."""
    h = harness
    p = h.principal()
    req = h.request(p, escalation_mode="never")
    handle = await start_gate(h.client, req, h.task_queue)
    result = await handle.result()
    brain = h.client.get_workflow_handle(c.brain_workflow_id(p))
    await brain.signal("request_turn", TurnRequest(gate_id=req.gate_id, workflow_id=handle.id))
    await brain.signal("request_turn", TurnRequest(gate_id=req.gate_id, workflow_id=handle.id))
    later = await run_never_gates(h, p, 1)
    assert result.n == 1 and later[0].n == 2
    status = await brain_status(h, p)
    assert status.counter == 2 and status.queued == []


async def test_a_release_arriving_with_a_new_run_frees_the_carried_holder(harness):
    """Regression: a release_turn signal delivered in the first task of a continued run
    used to act on an empty state and be lost, leaving the queue stuck until the lease."""
    from vicar.models.brain import BrainState

    h = harness
    p = h.principal()
    far = 10**10  # the lease never expires during the test
    carried = BrainState(
        counter=5,
        holder=TurnRequest(gate_id="old", workflow_id="old-wf"),
        holder_n=5,
        lease_deadline=far,
        assigned=[("old", 5)],
    )
    await h.client.start_workflow(
        c.BRAIN_WORKFLOW,
        BrainInput(principal=p, state=carried),
        id=c.brain_workflow_id(p),
        task_queue=h.task_queue,
        start_signal="release_turn",
        start_signal_args=["old"],
    )

    async def freed():
        s = await brain_status(h, p)
        return s if s.holder is None else None

    status = await wait_for(freed, timeout=10)
    assert status.counter == 5
    result = await asyncio.wait_for(
        (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(), timeout=30
    )
    assert result.n == 6


@pytest.mark.soak
async def test_two_hundred_concurrent_gates_stay_under_the_update_limit(harness, capfd, caplog):
    """200 gates of one principal at once: Temporal admits 10 in-flight updates per
    workflow, so past a few in flight the gates queue by signal. No RESOURCE_EXHAUSTED
    (the client would retry it with backoff), no stray unretrieved futures, N gap-free."""
    h = harness
    p = h.principal()
    results = await run_never_gates(h, p, 200)
    assert sorted(r.n for r in results) == list(range(1, 201))
    assert (await brain_status(h, p)).counter == 200
    out, err = capfd.readouterr()
    logged = out + err + "\n".join(r.getMessage() for r in caplog.records)
    assert "ResourceExhausted" not in logged and "RESOURCE_EXHAUSTED" not in logged
    assert "in-flight updates" not in logged
    assert "never retrieved" not in logged


async def _brain_events(h, principal: str) -> list:
    from temporalio.api.enums.v1 import EventType

    handle = h.client.get_workflow_handle(c.brain_workflow_id(principal))
    return [EventType.Name(e.event_type) async for e in handle.fetch_history_events()]


async def test_a_principals_next_gate_is_granted_by_the_record_of_the_last(harness):
    """The cheaper turn protocol: a gate that decided alone gives the turn back by its
    outcome record. Sequential gates of one principal: every grant is the update's reply
    (no `turn_granted` signal) and no gate signals `release_turn`, so the brain's history
    holds no signal at all, one workflow task per gate, and N stays gap-free."""
    h = harness
    p = h.principal()
    results = [
        await (
            await start_gate(h.client, h.request(p, escalation_mode="never", artifact=f"change {i}"), h.task_queue)
        ).result()
        for i in range(6)
    ]
    assert [r.n for r in results] == [1, 2, 3, 4, 5, 6]
    events = await _brain_events(h, p)
    assert "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED" not in events
    assert "EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED" not in events
    assert events.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 6
    # One task to start plus one per update; the first also reads the stored counter.
    assert events.count("EVENT_TYPE_WORKFLOW_TASK_COMPLETED") <= 6 + 3
    status = await brain_status(h, p)
    assert status.counter == 6 and status.queued == []


async def test_a_holder_that_died_without_a_record_frees_the_turn_at_once(harness):
    """The holder's record never comes (its workflow was terminated): the brain asks it
    for the turn (`turn_wanted`), the signal fails, and the next gate goes on without
    waiting for the lease (600 s here)."""
    h = harness
    p = h.principal()
    deaf_queue = f"deaf-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=deaf_queue, workflows=[DeafGate]):
        deaf = await h.client.start_workflow(DeafGate.run, id=f"deaf-{uuid.uuid4().hex[:8]}", task_queue=deaf_queue)
        await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=p),
            id=c.brain_workflow_id(p),
            task_queue=h.task_queue,
            start_signal="request_turn",
            start_signal_args=[TurnRequest(gate_id="deaf", workflow_id=deaf.id)],
        )

        async def deaf_has_turn():
            return await deaf.query(DeafGate.has_turn)

        await wait_for(deaf_has_turn)
        await deaf.terminate(reason="test: the gate's worker is gone for good")
    result = await asyncio.wait_for(
        (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(), timeout=30
    )
    assert result.n == 2
    assert "EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED" in await _brain_events(h, p)


@workflow.defn(sandboxed=False)
class SlowHolder:
    """Holds a turn granted with nobody waiting (so it would give it back by a record)
    and never records: it gives the turn back only when the brain asks for it."""

    def __init__(self) -> None:
        self.granted = self.wanted = False

    @workflow.signal
    def turn_granted(self, grant) -> None:
        self.granted = True

    @workflow.signal
    def turn_wanted(self, gate_id: str) -> None:
        self.wanted = True

    @workflow.query
    def state(self) -> tuple[bool, bool]:
        return self.granted, self.wanted

    @workflow.run
    async def run(self, principal: str) -> None:
        await workflow.wait_condition(lambda: self.wanted)
        await workflow.get_external_workflow_handle(c.brain_workflow_id(principal)).signal("release_turn", "slow")
        await workflow.wait_condition(lambda: False)


async def test_a_holder_still_working_is_asked_for_the_turn(harness):
    """A gate that queues behind a holder whose record is not in makes the brain ask the
    holder (`turn_wanted`); it gives the turn back and the queued gate goes on long
    before the lease (600 s)."""
    h = harness
    p = h.principal()
    queue = f"slow-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=queue, workflows=[SlowHolder]):
        slow = await h.client.start_workflow(SlowHolder.run, p, id=f"slow-{uuid.uuid4().hex[:8]}", task_queue=queue)
        await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=p),
            id=c.brain_workflow_id(p),
            task_queue=h.task_queue,
            start_signal="request_turn",
            start_signal_args=[TurnRequest(gate_id="slow", workflow_id=slow.id)],
        )

        async def granted():
            return (await slow.query(SlowHolder.state))[0]

        await wait_for(granted)
        result = await asyncio.wait_for(
            (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(), timeout=30
        )
        assert result.n == 2
        assert tuple(await slow.query(SlowHolder.state)) == (True, True)
        await slow.terminate()


async def test_a_gate_asking_again_during_its_own_grant_is_granted_by_signal(harness):
    """Regression: the update that takes a free turn waits on the store (another writer
    holds it) while the same gate asks again by signal, as its retried activity does on a
    worker that does not send updates. The ask must not queue the gate behind itself,
    where it would wait for the lease (600 s): the brain grants it again by signal,
    with the same N."""
    h = harness
    p = h.principal()
    store_path = h.registry.get(p).store.path
    deaf_queue = f"deaf-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=deaf_queue, workflows=[DeafGate]):
        deaf = await h.client.start_workflow(DeafGate.run, id=f"deaf-{uuid.uuid4().hex[:8]}", task_queue=deaf_queue)
        # A short task timeout: the blocked local activity heartbeats its workflow task
        # after 80% of it, so the signal is delivered while the update still waits.
        brain = await h.client.start_workflow(
            c.BRAIN_WORKFLOW,
            BrainInput(principal=p),
            id=c.brain_workflow_id(p),
            task_queue=h.task_queue,
            task_timeout=timedelta(seconds=2),
        )
        await wait_for(lambda: brain_status(h, p))
        ask = TurnRequest(gate_id="deaf", workflow_id=deaf.id)
        writer = sqlite3.connect(store_path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            update = await brain.start_update(
                "take_turn", ask, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=TurnReply
            )
            await brain.signal("request_turn", ask)

            async def asked_twice():
                return (await brain_status(h, p)).queued == ["deaf"]

            await wait_for(asked_twice, timeout=30)  # a bound, not a timing: slow under load
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert (await update.result()).n == 1

        async def deaf_has_turn():
            return await deaf.query(DeafGate.has_turn)

        await wait_for(deaf_has_turn, timeout=15)
        status = await brain_status(h, p)
        assert status.holder == "deaf" and status.queued == [] and status.counter == 1
        await deaf.terminate()
