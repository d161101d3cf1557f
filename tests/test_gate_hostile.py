"""Gates, brains and sessions started or answered by a hostile or careless client
(issue 24 items 5, 7, 8, 9 and the oversized answer): a gate id is single-use, a bad
start fails in one line, the allow-list is applied when the answer comes, and the
caller's Temporal identity is recorded beside the responder's name."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RawValue, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError
from typer.testing import CliRunner

from vicar import contracts as c
from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.models import GateResult, GateStatus, HumanAnswer, OutcomeRecord
from vicar.models.brain import BrainInput
from vicar.responders import load_allowed
from vicar.runtime.codec import data_converter

from .conftest import wait_escalated, wait_for
from .test_bad_input import cli_env  # noqa: F401 (a fixture)

runner = CliRunner()


async def cli(*args: str):
    return await asyncio.to_thread(runner.invoke, app, list(args))


async def failed_at_once(handle, within: float = 15.0) -> ApplicationError:
    """The workflow failed (not a task retried for ever), with one non-retryable line."""
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), within)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable, cause
    assert "\n" not in cause.message and cause.message
    return cause


def human_records(h, principal: str) -> list[OutcomeRecord]:
    return [
        OutcomeRecord.model_validate_json(r) for _, r in h.registry.get(principal).store.outcomes(answered_by="human")
    ]


async def test_a_finished_gate_started_again_returns_its_recorded_answer(harness):
    h = harness
    p = h.principal()
    req = h.request(p, artifact="Add an index on users.email.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="correct", text="first", responder="alice"))
    first = await handle.result()

    # Another client, the default id-reuse policy (a completed id may be used again).
    again = await h.client.start_workflow(
        c.GATE_WORKFLOW,
        req,
        id=c.gate_workflow_id(req.gate_id),
        task_queue=h.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        result_type=GateResult,
    )
    second = await asyncio.wait_for(again.result(), 30)  # never escalates: nobody is asked again
    assert (second.action, second.text, second.responder, second.n) == (first.action, "first", "alice", first.n)
    assert second.answered_by is first.answered_by and second.escalated
    assert [r.response_text for r in human_records(h, p)] == ["first"]


async def test_bad_starts_fail_in_their_first_task(harness):
    h = harness
    victim = h.principal()
    client = h.client
    starts = {
        "brain config garbage": (c.BRAIN_WORKFLOW, [{"principal": victim, "config": "garbage"}]),
        "brain no input": (c.BRAIN_WORKFLOW, []),
        "gate no input": (c.GATE_WORKFLOW, []),
        "gate two inputs": (c.GATE_WORKFLOW, [h.request(victim).model_dump(mode="json"), {}]),
        "session no input": (c.SESSION_WORKFLOW, []),
        "session bad principal": (c.SESSION_WORKFLOW, [{"principal": "../x", "session_id": "s"}]),
        "consolidation garbage": (c.CONSOLIDATION_WORKFLOW, ["garbage"]),
        "move no input": (c.MOVE_WORKFLOW, []),
        # `temporal workflow start --input-base64`: a JSON payload that is not JSON
        "gate not JSON": (c.GATE_WORKFLOW, [RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b"{"))]),
        "brain not JSON": (c.BRAIN_WORKFLOW, [RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b"{"))]),
        "move not JSON": (c.MOVE_WORKFLOW, [RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b"{"))]),
        "move two inputs": (c.MOVE_WORKFLOW, [{"principal": victim, "to_shard": 0}, {}]),
    }
    for what, (kind, args) in starts.items():
        wid = (
            c.brain_workflow_id(victim)
            if kind == c.BRAIN_WORKFLOW and what.endswith("garbage")
            else f"hostile-{uuid.uuid4().hex[:8]}"
        )
        handle = await client.start_workflow(kind, args=args, id=wid, task_queue=h.task_queue)
        cause = await failed_at_once(handle)
        assert cause.message.startswith("invalid"), (what, cause.message)

    # The victim's gates are not held by the brain that failed: a new one takes over.
    req = h.request(victim)
    handle = await start_gate(h.client, req, h.task_queue)
    details = await wait_escalated(h.client, req.gate_id)
    assert details.status is GateStatus.escalated
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", responder="alice"))
    assert (await handle.result()).n == 1


async def test_a_gate_whose_brain_never_runs_escalates_with_proxy_error(harness):
    h = harness
    victim = h.principal()
    # A brain on a queue no worker polls: it never runs, so it never grants a turn.
    await h.client.start_workflow(
        c.BRAIN_WORKFLOW, BrainInput(principal=victim), id=c.brain_workflow_id(victim), task_queue="nobody-polls-this"
    )
    req = h.request(victim)
    await start_gate(h.client, req, h.task_queue)

    async def escalated():
        d = await gate_details(h.client, req.gate_id)
        return d if d and d.status is GateStatus.escalated else None

    details = await wait_for(escalated, timeout=45)
    assert details.calibration_guard == "proxy_error" and "brain" in details.calibration_note


async def test_allow_list_applies_when_the_answer_comes(cli_env, harness):  # noqa: F811
    h = harness
    p = h.principal(responders=None)  # its list is what this test writes
    assert (await cli("principal", "allow", p, "alice")).exit_code == 0
    req = h.request(p, artifact="Rename a column.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    # Changed while the gate waits: alice out, bob in.
    assert (await cli("principal", "allow", p, "bob")).exit_code == 0
    assert (await cli("principal", "disallow", p, "alice")).exit_code == 0
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update("respond", HumanAnswer(action="approve", responder="alice"), result_type=str)
    assert "may not answer" in str(info.value.cause)
    await handle.signal("human_response", HumanAnswer(action="approve", responder="alice"))
    await asyncio.sleep(1.5)
    assert (await gate_details(h.client, req.gate_id)).status is GateStatus.escalated
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="no", responder="bob"))
    assert (await handle.result()).responder == "bob"

    # Removing the last name leaves nobody, not anyone; an explicit reset opens it.
    assert (await cli("principal", "disallow", p, "bob")).exit_code == 0
    req = h.request(p, artifact="Drop a column.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update("respond", HumanAnswer(action="approve", responder="carol"), result_type=str)
    assert "nobody may answer" in str(info.value.cause)
    assert (await cli("principal", "allow", p, "--anyone")).exit_code == 0
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", responder="carol"))
    assert (await handle.result()).responder == "carol"

    # Every change is logged, with who made it and when.
    log = [json.loads(line) for line in (h.settings.principals_dir / p / "responders.log").read_text().splitlines()]
    assert [e["change"] for e in log] == ["allow", "allow", "disallow", "disallow", "anyone"]
    assert all(e["by"] and e["at"] for e in log)
    assert load_allowed(h.settings.principals_dir, p) == []


async def test_the_callers_identity_is_recorded_and_can_be_required(harness, temporal_env):
    h = harness
    p = h.principal()
    attacker = await Client.connect(
        temporal_env.client.service_client.config.target_host, identity="attacker@evil", data_converter=data_converter()
    )
    req = h.request(p, artifact="Rotate the keys.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await attacker.get_workflow_handle(handle.id).execute_update(
        "respond", HumanAnswer(action="approve", responder="alice"), result_type=str
    )
    result = await handle.result()
    assert (result.responder, result.responder_identity) == ("alice", "attacker@evil")
    assert [(r.responder, r.responder_identity) for r in human_records(h, p)] == [("alice", "attacker@evil")]

    # A signal's identity too.
    req = h.request(p, artifact="Rotate the keys again.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await attacker.get_workflow_handle(handle.id).signal(
        "human_response", HumanAnswer(action="reject", responder="alice")
    )
    assert (await handle.result()).responder_identity == "attacker@evil"

    # Required to match: refused, then accepted from a client whose identity is the responder.
    h.settings.require_identity_match = True
    req = h.request(p, artifact="Rotate the keys a third time.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await attacker.get_workflow_handle(handle.id).execute_update(
            "respond", HumanAnswer(action="approve", responder="alice"), result_type=str
        )
    assert "identity" in str(info.value.cause) and "attacker@evil" in str(info.value.cause)
    alice = await Client.connect(
        temporal_env.client.service_client.config.target_host, identity="alice", data_converter=data_converter()
    )
    await alice.get_workflow_handle(handle.id).execute_update(
        "respond", HumanAnswer(action="approve", responder="alice"), result_type=str
    )
    assert (await handle.result()).responder_identity == "alice"


async def test_an_oversized_answer_is_refused_naming_the_limit(harness):
    h = harness
    p = h.principal()
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update(
            "respond", {"action": "approve", "text": "x" * 1_000_000, "responder": "alice"}, result_type=str
        )
    message = str(info.value.cause)
    assert "Failed decoding" not in message and "20000" in message and "text" in message, message
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", responder="alice"))
    assert (await handle.result()).responder == "alice"
