"""Issue 34, items 1-3: a payload a worker cannot open, or one sent unsealed, is refused
where it arrives (an update rejected, a signal dropped and logged, a start failed in one
line) and never fails a workflow task; the worker, the codec and the server are real."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.contrib.pydantic import pydantic_data_converter

from vicar import contracts as c
from vicar.client import change_control, get_control
from vicar.client.gates import answer_gate, list_escalations, start_gate
from vicar.models import GateStatus, HumanAnswer
from vicar.runtime.codec import AesGcmCodec, new_key_line, parse_keys
from vicar.runtime.server import temporal_binary

from .conftest import wait_escalated, wait_for

ANSWER = HumanAnswer(action="approve", text="from elsewhere", responder="alice")


async def other_client(h, codec: AesGcmCodec | None) -> Client:
    """A client of the same server: sealing with other keys, or (None) sending plain JSON."""
    converter = dataclasses.replace(pydantic_data_converter, payload_codec=codec)
    return await Client.connect(
        h.client.service_client.config.target_host, namespace=h.client.namespace, data_converter=converter
    )


def foreign_codec(key_id: str = "kx") -> AesGcmCodec:
    return AesGcmCodec(parse_keys(new_key_line(key_id), "test"))


async def task_failures(handle) -> list[str]:
    """The workflow task failures in a workflow's history (every run), and one pending
    retry if the server is retrying a failed task now."""
    failed = [
        e.workflow_task_failed_event_attributes.failure.message
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    attempt = (await handle.describe()).raw_description.pending_workflow_task.attempt
    return failed + ([f"pending workflow task attempt {attempt}"] if attempt > 1 else [])


async def settle(handle, count: int) -> None:
    """Until the workflow has handled its signals: `count` signalled events, then a
    completed workflow task after the last of them."""

    async def handled():
        events = (await handle.fetch_history()).events
        signalled = [
            i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        ]
        if len(signalled) < count:
            return False
        failed = any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in events[signalled[-1] :])
        done = any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events[signalled[-1] :])
        return failed or done

    await wait_for(handled, timeout=30)


async def test_an_answer_sealed_with_another_key_is_refused_and_the_gate_still_answers(harness):
    """Item 1: `VICAR_CODEC_KEYS=kx:... vicar answer g0 ...` wedged g0 for good."""
    h = harness
    req = h.request(h.principal(), escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    foreign = (await other_client(h, foreign_codec())).get_workflow_handle(handle.id)
    await foreign.signal(c.HUMAN_RESPONSE_SIGNAL, ANSWER)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await asyncio.wait_for(foreign.execute_update(c.RESPOND_UPDATE, ANSWER), 30)
    assert "sealed with key 'kx', which this worker lacks" in str(refused.value.cause)
    await settle(handle, 1)
    assert await task_failures(handle) == []
    reply = await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="no", responder="alice"))
    assert "accepted" in reply
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.action.value == "reject" and result.responder == "alice"
    assert await task_failures(handle) == []


async def test_a_poisoned_or_misshapen_signal_leaves_the_brain_working(harness):
    """Item 2: `temporal workflow signal -w vicar-brain/carol --name release_turn --input
    '"x"' --input-meta encoding=binary/encrypted --input-meta encryption-key-id=nope`
    broke every later rule change and pause of carol's."""
    h = harness
    p = h.principal()
    first = h.request(p, escalation_mode="never", task_type="docs")
    await (await start_gate(h.client, first, h.task_queue)).result()
    brain = h.client.get_workflow_handle(c.brain_workflow_id(p))
    target = h.client.service_client.config.target_host
    signal = [temporal_binary(), "workflow", "signal", "-w", brain.id, "--address", target]
    signal += ["--namespace", h.client.namespace]
    sent = [
        ["--name", c.RELEASE_TURN_SIGNAL, "--input", '"x"']
        + ["--input-meta", "encoding=binary/encrypted", "--input-meta", "encryption-key-id=nope"],
        ["--name", c.RELEASE_TURN_SIGNAL],  # no argument at all
        ["--name", c.RELEASE_TURN_SIGNAL, "--input", '"a"', "--input", '"b"'],  # two
        ["--name", c.REQUEST_TURN_SIGNAL, "--input", '{"gate_id": 1}'],  # not a TurnRequest
    ]
    for extra in sent:
        out = await asyncio.to_thread(subprocess.run, signal + extra, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    await settle(brain, len(sent))
    assert await task_failures(brain) == []
    control = await asyncio.wait_for(
        change_control(h.client, p, dict(op="pause", by="carol"), task_queue=h.task_queue), 60
    )
    assert control.pauses and control.pauses[0].by == "carol"
    assert await task_failures(brain) == []
    # A gate of the principal still gets its turn (and waits: paused).
    second = h.request(p, escalation_mode="never", task_type="docs")
    handle = await start_gate(h.client, second, h.task_queue)
    await wait_escalated(h.client, second.gate_id)
    await handle.cancel()


async def test_an_unsealed_write_is_refused(harness):
    """Item 3: a plain client (no key) added an approving rule to a principal's brain."""
    h = harness
    p = h.principal()
    await (await start_gate(h.client, h.request(p, escalation_mode="never", task_type="docs"), h.task_queue)).result()
    plain = await other_client(h, None)
    rule = {"name": "keyless", "effect": "approve", "task_types": ["deploy"], "text": "approved by nobody"}
    brain = plain.get_workflow_handle(c.brain_workflow_id(p))
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await asyncio.wait_for(
            brain.execute_update(c.CONTROL_UPDATE, {"op": "add_rule", "by": "keyless-intruder", "rule": rule}), 30
        )
    assert "not sealed" in str(refused.value.cause)
    assert (await get_control(h.client, p)).rules == []
    gate = h.request(p, escalation_mode="always", task_type="deploy")
    gate_handle = await start_gate(h.client, gate, h.task_queue)
    await wait_escalated(h.client, gate.gate_id)  # not answered by the intruder's rule

    # An answer, unsealed: the update is refused, the signal dropped.
    plain_gate = plain.get_workflow_handle(gate_handle.id)
    await plain_gate.signal(c.HUMAN_RESPONSE_SIGNAL, ANSWER)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await asyncio.wait_for(plain_gate.execute_update(c.RESPOND_UPDATE, ANSWER), 30)
    assert "not sealed" in str(refused.value.cause)
    await settle(gate_handle, 1)
    details = await wait_escalated(h.client, gate.gate_id)
    assert details.status is GateStatus.escalated
    assert await task_failures(gate_handle) == [] and await task_failures(brain) == []
    await gate_handle.cancel()

    # A gate started unsealed fails at once, in one line.
    started = await plain.start_workflow(
        c.GATE_WORKFLOW,
        h.request(p, escalation_mode="always"),
        id=c.gate_workflow_id(f"plain-{p}"),
        task_queue=h.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(started.result(), 60)
    assert "not sealed" in str(failed.value.cause) and "\n" not in str(failed.value.cause)


async def test_a_raw_payload_in_a_sealed_envelope_is_not_taken_for_sealed(harness):
    """A plain client cannot pass a payload off as opened by the codec: what makes a
    payload sealed is the codec opening it, not metadata the sender writes."""
    h = harness
    p = h.principal()
    await (await start_gate(h.client, h.request(p, escalation_mode="never", task_type="docs"), h.task_queue)).result()
    plain = await other_client(h, None)
    forged = Payload(
        metadata={"encoding": b"json/plain", "vicar-opened-with": b"test"},
        data=b'{"op": "pause", "by": "forger"}',
    )
    with pytest.raises(WorkflowUpdateFailedError):
        await asyncio.wait_for(
            plain.get_workflow_handle(c.brain_workflow_id(p)).execute_update(c.CONTROL_UPDATE, RawValue(forged)), 30
        )
    assert (await get_control(h.client, p)).pauses == []


async def test_a_start_with_several_arguments_it_cannot_open_fails_no_task(harness):
    """The SDK converts the inputs itself when there are not exactly one (the workflow
    then refuses the count): one it cannot open, or of an unknown encoding, failed the
    workflow task at every retry instead."""
    h = harness
    p = h.principal()
    foreign = await other_client(h, foreign_codec())
    plain = await other_client(h, None)
    odd = RawValue(Payload(metadata={"encoding": b"binary/odd"}, data=b"\x00"))
    for n, (client, args) in enumerate(
        [(foreign, [h.request(p), h.request(p)]), (plain, [odd, "x"]), (plain, [RawValue(Payload()), odd])]
    ):
        handle = await client.start_workflow(
            c.GATE_WORKFLOW, args=args, id=c.gate_workflow_id(f"several-{n}-{p}"), task_queue=h.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 60)
        assert "\n" not in str(failed.value.cause), failed.value.cause
        assert await task_failures(h.client.get_workflow_handle(handle.id)) == []


async def test_a_listing_survives_a_summary_it_cannot_read(harness):
    """A workflow started under a gate's type by a plain client, with a forged summary
    and `escalated` status, on a queue no worker polls (so it stays Running): the
    listing (the CLI's and the inbox's, one function) shows it as unreadable instead of
    failing for everyone."""
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from vicar.workflows import search_attributes as sa

    h = harness
    p = h.principal()
    plain = await other_client(h, None)
    forged = await plain.start_workflow(
        c.GATE_WORKFLOW,
        h.request(p),
        id=c.gate_workflow_id(f"forged-{p}"),
        task_queue=f"nobody-polls-{p}",
        memo={c.ESCALATION_MEMO: "not a summary"},
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(sa.STATUS, GateStatus.escalated.value), SearchAttributePair(sa.PRINCIPAL, p)]
        ),
    )
    try:

        async def listed():
            return [d for d in await list_escalations(h.client, p) if d.workflow_id == forged.id]

        (row,) = await wait_for(listed)
        assert row.question == "(summary unreadable: not a gate's summary)" and row.principal == p
    finally:
        await forged.terminate()
