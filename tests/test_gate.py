"""The approval gate end to end on a real Temporal dev server."""

from __future__ import annotations

import asyncio

from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.models import AnsweredBy, GateStatus, HumanAnswer

from .conftest import wait_escalated, wait_for


async def escalate_and_answer(h, req, action="approve", text="Looks good."):
    handle = await start_gate(h.client, req, h.task_queue)

    details = await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action=action, text=text, responder="alice"))
    return details, await handle.result()


async def test_gate_escalates_and_completes_on_answer(harness):
    h = harness
    p = h.principal()
    req = h.request(p, artifact="Add an index on users.email. Rollback: drop the index.")
    details, result = await escalate_and_answer(h, req, "correct", "What about the lock time?")
    assert details.proxy_confidence == 0.0  # nothing in memory: no basis for a guess
    assert result.escalated and result.answered_by is AnsweredBy.human
    assert result.action.value == "correct" and result.text == "What about the lock time?"
    assert result.n == 1
    mem = h.registry.get(p)
    stats = mem.stats()
    assert stats.chunks == 1 and stats.human_answered == 1


async def run_answering(h, req, action="approve", text="Fine, ship it."):
    """Run a gate; if it escalates, answer it as the human."""
    handle = await start_gate(h.client, req, h.task_queue)

    async def settled():
        if (await handle.describe()).status.name != "RUNNING":
            return "done"
        d = await gate_details(h.client, req.gate_id)
        return "escalated" if d and d.status is GateStatus.escalated else None

    if await wait_for(settled) == "escalated":
        await answer_gate(h.client, req.gate_id, HumanAnswer(action=action, text=text, responder="alice"))
    return await handle.result()


async def test_gate_decides_alone_when_memory_is_confident(harness):
    h = harness
    p = h.principal()
    results = []
    for i in range(6):
        req = h.request(p, task_type="docs", artifact=f"Fix typo number {i} in the installation guide.")
        results.append(await run_answering(h, req))
    escalated = [r.escalated for r in results]
    assert escalated[:2] == [True, True]  # no memory, then one answer: not enough evidence
    assert escalated[-1] is False  # several consistent human answers: the proxy decides
    first_alone = escalated.index(False)
    assert all(not e for e in escalated[first_alone:])
    alone = results[-1]
    assert alone.answered_by is AnsweredBy.proxy
    assert alone.action.value == "approve" and alone.confidence >= 0.8
    assert alone.text == "Fine, ship it."
    assert [r.n for r in results] == [1, 2, 3, 4, 5, 6]
    stats = h.registry.get(p).stats()
    assert stats.human_answered == first_alone
    assert stats.proxy_answered == 6 - first_alone


async def test_proxy_answers_never_count_as_human_answers(harness):
    h = harness
    p = h.principal()
    # `never` gates on an empty memory: the proxy answers 'Approved.' on its own.
    for i in range(5):
        r = await (
            await start_gate(
                h.client,
                h.request(p, task_type="docs", escalation_mode="never", artifact=f"Fix typo {i}."),
                h.task_queue,
            )
        ).result()
        assert r.answered_by is AnsweredBy.proxy and not r.escalated
        assert r.text == "Approved." and r.confidence == 0.0
    stats = h.registry.get(p).stats()
    assert stats.proxy_answered == 5 and stats.human_answered == 0
    assert all(ch.answered_by == "proxy" for ch in h.registry.get(p).store.chunks())
    # Five of its own answers give the proxy no evidence: the next gate still escalates.
    req = h.request(p, task_type="docs", artifact="Fix typo 6.")
    details, result = await escalate_and_answer(h, req, "approve", "ok")
    assert details.proxy_confidence == 0.0
    assert result.answered_by is AnsweredBy.human


async def test_always_mode_escalates_even_when_the_proxy_is_confident(harness):
    h = harness
    p = h.principal()
    for i in range(6):
        await run_answering(h, h.request(p, task_type="docs", artifact=f"Fix typo number {i}."))
    req = h.request(p, task_type="docs", artifact="Fix typo number 7.", escalation_mode="always")
    details, result = await escalate_and_answer(h, req, "reject", "Not this one.")
    assert details.proxy_confidence >= 0.8 and details.proxy_action.value == "approve"
    assert result.escalated and result.action.value == "reject" and result.text == "Not this one."


async def test_escalations_are_listed_with_question_and_guess(harness):
    from vicar.client.gates import list_escalations

    h = harness
    p = h.principal()
    req = h.request(p, question="Approve or revise the proposed plan: drop table?")
    handle = await start_gate(h.client, req, h.task_queue)

    async def listed():
        return [d for d in await list_escalations(h.client, p) if d.gate_id == req.gate_id]

    [d] = await wait_for(listed)
    assert d.question == req.question and d.principal == p and d.proxy_confidence == 0.0
    assert "no memory" in d.proxy_text
    desc = await handle.describe()
    assert desc.typed_search_attributes  # status, principal, state and task type for the UI
    # The UI's summary (list) and details (the gate's page).
    assert await desc.static_summary() == f"{p} · PLAN_ASSERT / {req.task_type}: {req.question}"
    assert f"vicar answer {req.gate_id} ACTION" in await desc.static_details()
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", responder="alice"))
    await handle.result()


async def test_human_response_signal_answers_and_a_bad_one_is_dropped(harness):
    h = harness
    p = h.principal()
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)

    await wait_escalated(h.client, req.gate_id)
    await handle.signal("human_response", HumanAnswer(action="sure-why-not", text="?"))
    await asyncio.sleep(0.5)
    assert (await gate_details(h.client, req.gate_id)).status is GateStatus.escalated  # still waiting
    await handle.signal("human_response", HumanAnswer(action="correct", text="Split it in two.", responder="bo"))
    result = await handle.result()
    assert result.action.value == "correct" and result.text == "Split it in two."
    assert result.responder == "bo" and result.answered_by is AnsweredBy.human


async def test_escalations_are_listed_with_no_worker_running(temporal_env, embedder, settings, monkeypatch):
    """`vicar escalations` reads visibility alone: with the worker stopped, the waiting
    gate is still listed, with its question, the proxy's guess and how long it waited."""
    import json
    import uuid

    from typer.testing import CliRunner

    from vicar.cli import app
    from vicar.client.gates import list_escalations
    from vicar.memory.registry import MemoryRegistry
    from vicar.models import GateRequest
    from vicar.worker import build_worker

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    p = f"p-{uuid.uuid4().hex[:8]}"
    req = GateRequest(
        principal=p,
        gate_id=f"g-{uuid.uuid4().hex[:8]}",
        state="WORK_ASSERT",
        task_type="docs",
        question="Ship the release notes?",
    )
    try:
        async with worker:
            handle = await start_gate(temporal_env.client, req, task_queue)
            await wait_escalated(temporal_env.client, req.gate_id)
    finally:
        registry.close()

    # The worker is gone: a query would hang; the list does not. Visibility is eventually
    # consistent: each listing is bounded, and the gate shows up within the wait.
    async def listed():
        return await asyncio.wait_for(list_escalations(temporal_env.client, p), 10)

    [d] = await wait_for(listed)
    assert (d.gate_id, d.workflow_id, d.question) == (req.gate_id, handle.id, req.question)
    assert d.status is GateStatus.escalated and d.escalated_at is not None and "no memory" in d.proxy_text
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    shown = await asyncio.to_thread(CliRunner().invoke, app, ["escalations", "--principal", p, "-o", "json"])
    assert shown.exit_code == 0, shown.stderr
    [row] = json.loads(shown.stdout)
    assert row["gate_id"] == req.gate_id and row["waited_seconds"] >= 0
    await handle.terminate(reason="test: done")

    async def gone():
        return await listed() == []

    assert await wait_for(gone)  # closed gates are not listed
