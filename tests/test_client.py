"""vicar.client, the API orchestrators use: open (idempotent), await with a timeout,
answer, list; and `vicar gate result` for an earlier gate."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from vicar.client import get_gate, list_escalations, open_gate
from vicar.errors import Conflict, NotFound, Pending

from .conftest import wait_escalated, wait_for


async def test_open_await_answer_and_attach(harness):
    h = harness
    p = h.principal()
    req = h.request(p, escalation_mode="always")
    gate = await open_gate(h.client, req, h.task_queue)
    with pytest.raises(asyncio.TimeoutError):
        await gate.result(timeout=0.5)  # waiting for the human: no result yet, the gate goes on
    await wait_escalated(h.client, req.gate_id)

    async def listed():  # visibility is eventually consistent
        return [d.gate_id for d in await list_escalations(h.client, p)]

    assert await wait_for(listed) == [req.gate_id]
    again = await open_gate(h.client, req, h.task_queue)  # a retried open attaches
    assert again.workflow_id == gate.workflow_id
    with pytest.raises(Conflict, match="different request"):
        await open_gate(h.client, req.model_copy(update={"question": "Something else?"}), h.task_queue)
    await again.answer("approve", "ok", responder="orchestrator")
    result = await gate.result(timeout=30)
    assert result.escalated and result.responder == "orchestrator"
    finished = await open_gate(h.client, req, h.task_queue)  # the same request after the end: its result
    assert (await finished.result(timeout=30)) == result
    assert (await get_gate(h.client, req.gate_id)).gate_id == req.gate_id
    with pytest.raises(NotFound):
        await get_gate(h.client, "no-such-gate")


async def test_gate_result_command(harness, monkeypatch):
    from vicar.cli import app

    h = harness
    p = h.principal()
    monkeypatch.setenv("TEMPORAL_ADDRESS", h.client.service_client.config.target_host)
    monkeypatch.setenv("VICAR_TASK_QUEUE", h.task_queue)
    runner = CliRunner()

    def cli(*args):
        return runner.invoke(app, ["gate", "result", *args])

    waiting = h.request(p, escalation_mode="always")
    gate = await open_gate(h.client, waiting, h.task_queue)
    await wait_escalated(h.client, waiting.gate_id)
    pending = await asyncio.to_thread(cli, waiting.gate_id)
    assert pending.exit_code == Pending.exit_code and "no result yet (status: escalated)" in pending.stderr
    await gate.answer("reject", "no", responder="t")
    done = await asyncio.to_thread(cli, gate.workflow_id, "--timeout", "30")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["action"] == "reject"  # stdout is the result's JSON only
    missing = await asyncio.to_thread(cli, "nobody-s-gate")
    assert missing.exit_code == NotFound.exit_code


async def test_the_readme_example_runs(harness, tmp_path):
    """The orchestrator's guide's client example (docs/orchestrator.md), as written, against
    a real worker (its wait shortened: a new principal's first gate goes to the human)."""
    import os
    import re
    import sys
    from pathlib import Path

    h = harness
    readme = (Path(__file__).resolve().parents[1] / "docs" / "orchestrator.md").read_text()
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "open_gate" in b]
    assert "timeout=600" in example
    script = tmp_path / "example.py"
    # Its own principal and gate id: brains are per principal on the whole test server.
    p, gate_id = h.principal(), f"deploy-{os.urandom(4).hex()}"
    assert example.count('"alice"') == 2 and example.count('"deploy-42"') == 1
    script.write_text(
        example.replace("timeout=600", "timeout=2").replace('"alice"', f'"{p}"').replace('"deploy-42"', f'"{gate_id}"')
    )
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": h.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": h.task_queue,
        "VICAR_DATA_DIR": str(tmp_path / "client"),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert out.decode().strip() == str([gate_id])  # escalated: the human has it


async def test_gate_start_wait_is_scriptable(harness, monkeypatch):
    """stdout holds only the result's JSON, progress goes to stderr, and the exit code is
    the outcome (11: rejected)."""
    from vicar.cli import app
    from vicar.errors import OUTCOME_EXIT

    h = harness
    monkeypatch.setenv("TEMPORAL_ADDRESS", h.client.service_client.config.target_host)
    monkeypatch.setenv("VICAR_TASK_QUEUE", h.task_queue)
    req = h.request(h.principal(), escalation_mode="always")
    args = [
        "gate",
        "start",
        "--principal",
        req.principal,
        "--gate-id",
        req.gate_id,
        "--state",
        req.state.value,
        "--task-type",
        req.task_type,
        "--question",
        req.question,
        "--escalation-mode",
        "always",
        "--wait",
    ]
    started = asyncio.create_task(asyncio.to_thread(CliRunner().invoke, app, args))

    async def opened():
        try:
            return await get_gate(h.client, req.gate_id)
        except NotFound:
            return None  # the command has not started it yet

    gate = await wait_for(opened)
    try:
        await wait_escalated(h.client, req.gate_id)
        await gate.answer("reject", "Not like this.", responder="t")
        result = await asyncio.wait_for(started, 60)
    finally:
        if not started.done():  # never leave the command waiting on a gate that cannot end
            await h.client.get_workflow_handle(gate.workflow_id).terminate(reason="test failed")
    assert result.exit_code == OUTCOME_EXIT["reject"] == 11, result.stderr
    assert json.loads(result.stdout)["action"] == "reject"
    assert f"gate {req.gate_id} started" in result.stderr


def test_every_option_has_help():
    import click
    import typer

    from vicar.cli import app

    def commands(group, path=()):
        for name, sub in group.commands.items():
            if isinstance(sub, click.Group):
                yield from commands(sub, (*path, name))
            else:
                yield (*path, name), sub

    missing = [
        (" ".join(path), p.opts)
        for path, cmd in commands(typer.main.get_command(app))
        for p in cmd.params
        if isinstance(p, click.Option) and not p.help
    ]
    assert missing == []


async def test_a_bad_field_through_the_client_is_invalid_input(harness):
    """The module's promise: errors are vicar.errors types, a bad field InvalidInput (one
    line naming the field), never pydantic's ValidationError, and nothing is started."""
    from pydantic import ValidationError

    from vicar import client as vc
    from vicar.errors import InvalidInput
    from vicar.models import GateRequest, HumanAnswer
    from vicar.models.limits import DEFAULT_LIMITS

    h = harness
    p = h.principal()
    good = h.request(p, escalation_mode="always")
    bad_requests = [
        ({**good.model_dump(mode="json"), "principal": "../victim"}, "principal"),
        ({**good.model_dump(mode="json"), "taskType": "docs"}, "taskType"),
        (GateRequest.model_construct(**{**dict(good), "question": ""}), "question"),  # skipped validation
    ]
    for bad, field in bad_requests:
        with pytest.raises(InvalidInput) as info:
            await vc.open_gate(h.client, bad, h.task_queue)
        assert not isinstance(info.value, ValidationError)
        assert str(info.value).startswith("invalid GateRequest: ") and field in str(info.value)
        assert "\n" not in str(info.value)
    with pytest.raises(NotFound):
        await get_gate(h.client, good.gate_id)  # nothing was started

    gate = await vc.open_gate(h.client, good.model_dump(mode="json"), h.task_queue)  # a plain dict works
    await wait_escalated(h.client, good.gate_id)
    too_long = "x" * (DEFAULT_LIMITS.answer_text + 1)
    for call in (
        lambda: gate.answer("correct", too_long, responder="ann"),
        lambda: gate.answer("approve", "ok", responder="a\x1bb"),
        lambda: vc.answer(h.client, good.gate_id, {"action": "approve", "responder": "ann", "who": 1}),
        lambda: vc.answer(
            h.client, good.gate_id, HumanAnswer.model_construct(action="approve", text=too_long, responder="ann")
        ),
    ):
        with pytest.raises(InvalidInput, match=r"^invalid HumanAnswer: (text|responder|who)"):
            await call()
    with pytest.raises(InvalidInput, match="unknown action 'maybe'"):
        await gate.answer("maybe", responder="ann")
    await vc.answer(h.client, good.gate_id, {"action": "approve", "text": "ok", "responder": "ann"})
    assert (await gate.result(timeout=30)).responder == "ann"
