"""Issue 34's goal: no payload, signal or update sent by any client, with any key or none,
fails a workflow task. Every signal and update name (and one that does not exist) is
sent to a waiting gate, a brain and an open session with every kind of argument list a
client can make: none, several, plain, foreign-sealed, bogus ciphertext, an unknown
encoding, an empty payload, sealed but of the wrong shape. Then none of the three has a
failed workflow task, and each still works."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import RawValue

from vicar import contracts as c
from vicar.client import change_control
from vicar.client.gates import answer_gate, start_gate
from vicar.models import HumanAnswer
from vicar.models.session import SessionConfig, SessionSummary

from .conftest import wait_escalated
from .test_codec_holes import foreign_codec, other_client, settle, task_failures
from .test_session import open_session

PLAIN = {"encoding": b"json/plain"}


def argument_lists(foreign: Payload) -> dict[str, list[Payload]]:
    return {
        "none": [],
        "plain string": [Payload(metadata=PLAIN, data=b'"x"')],
        "plain object": [Payload(metadata=PLAIN, data=b'{"gate_id": "x", "action": "approve"}')],
        "not json": [Payload(metadata=PLAIN, data=b"{not json")],
        "bogus ciphertext": [
            Payload(metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"nope"}, data=b'"x"')
        ],
        "foreign key": [foreign],
        "unknown encoding": [Payload(metadata={"encoding": b"binary/odd"}, data=b"\x00")],
        "empty payload": [Payload()],
        "two": [Payload(metadata=PLAIN, data=b'"a"'), foreign],
        "three": [Payload(), Payload(metadata={"encoding": b"binary/odd"}), Payload(metadata=PLAIN, data=b"1")],
    }


SEALED_BUT_WRONG: dict[str, list[Any]] = {
    "sealed object": [{"bogus": 1}],
    "sealed list": [[1, 2]],
    "sealed two": ["a", "b"],
}


async def barrage(plain: Client, sealed: Client, workflow_id: str, foreign: Payload) -> int:
    """Every name with every argument list; returns how many signals were sent."""
    names = (*c.SIGNALS, "nope")
    every: list[list[Any]] = [*argument_lists(foreign).values(), *SEALED_BUT_WRONG.values()]
    sent = 0
    for name in names:
        for args in every:
            if name == c.END_SIGNAL and not args:
                continue  # a session's legitimate end (it carries no argument)
            client = sealed if args and not isinstance(args[0], Payload) else plain
            raw = [a if not isinstance(a, Payload) else RawValue(a) for a in args]
            await client.get_workflow_handle(workflow_id).signal(name, args=raw)
            sent += 1
    for name in (*c.UPDATES, "nope"):
        for args in every:
            client = sealed if args and not isinstance(args[0], Payload) else plain
            raw = [a if not isinstance(a, Payload) else RawValue(a) for a in args]
            try:
                await asyncio.wait_for(
                    client.get_workflow_handle(workflow_id).execute_update(name, args=raw), timeout=30
                )
            except Exception as exc:  # refused (an update failure, an RPC error): what is expected
                assert not isinstance(exc, TimeoutError), (workflow_id, name, args)
            else:
                raise AssertionError(f"{workflow_id} took update {name} with {args}")
    return sent


async def test_no_write_from_any_client_fails_a_workflow_task(harness):
    h = harness
    p = h.principal()
    await (await start_gate(h.client, h.request(p, escalation_mode="never", task_type="docs"), h.task_queue)).result()
    waiting = h.request(p, escalation_mode="always")
    gate = await start_gate(h.client, waiting, h.task_queue)
    await wait_escalated(h.client, waiting.gate_id)
    session, _ = await open_session(
        h.client, p, "s-writes", SessionConfig(idle_timeout_seconds=3600), h.task_queue, [f"vicar-gate/in-{p}"]
    )
    brain = h.client.get_workflow_handle(c.brain_workflow_id(p))
    plain = await other_client(h, None)
    foreign = (await foreign_codec().encode([Payload(metadata=PLAIN, data=b'"x"')]))[0]
    for handle in (gate, brain, session):
        sent = await barrage(plain, h.client, handle.id, foreign)
        await settle(handle, sent)
        assert await task_failures(handle) == [], handle.id
    # Each still works: the gate takes the right answer, the brain a change, the session
    # says how it is.
    control = await change_control(h.client, p, dict(op="pause", by="carol"), task_queue=h.task_queue)
    assert control.pauses
    summary = await session.query(c.SUMMARY_QUERY, result_type=SessionSummary)
    assert summary.status == "open"
    await answer_gate(h.client, waiting.gate_id, HumanAnswer(action="approve", text="ok", responder="alice"))
    assert (await asyncio.wait_for(gate.result(), 60)).action.value == "approve"
    for handle in (gate, brain, session):
        assert await task_failures(handle) == [], handle.id
