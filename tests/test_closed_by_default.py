"""One rule for who may answer, on every surface: closed by default. A principal with no
allow-list is answered by its own name only, at the gate itself, whether the answer comes
from `vicar answer`, the Python client, the `respond` update or the `human_response`
signal, as in the inbox and Slack; an operator opens it by name or to everyone."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.errors import VicarError
from vicar.models import GateStatus, HumanAnswer
from vicar.responders import change_allowed

from .conftest import wait_escalated
from .test_bad_input import cli_env, error_line  # noqa: F401 (a fixture)

runner = CliRunner()


async def cli(*args: str):
    return await asyncio.to_thread(runner.invoke, app, list(args))


async def test_a_principal_with_no_list_is_answered_by_itself_only_on_every_surface(cli_env, harness):
    h = harness
    p = h.principal(responders=None)  # no allow-list was ever written for p
    req = h.request(p, artifact="Plan: add an index on users.email.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)

    result = await cli("answer", req.gate_id, "approve", "ok", "--responder", "mallory")
    assert result.exit_code == 5, result.output
    line = error_line(result)
    assert "'mallory' may not answer for" in line and f"{p} has no allow-list" in line, line
    assert f"vicar principal allow {p} mallory" in line, line  # says how to let mallory in
    with pytest.raises(VicarError, match="'mallory' may not answer"):
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder="mallory"))
    await handle.signal("human_response", HumanAnswer(action="approve", text="ok", responder="mallory"))
    await asyncio.sleep(1.0)
    assert (await gate_details(h.client, req.gate_id)).status is GateStatus.escalated  # nobody got through

    # The principal answering as itself needs no list.
    result = await cli("answer", req.gate_id, "approve", "ok", "--responder", p)
    assert result.exit_code == 0, result.output
    assert (await handle.result()).responder == p


async def test_an_operator_opens_a_principal_by_name_or_to_everyone(cli_env, harness):
    h = harness
    p = h.principal(responders=None)
    change_allowed(h.settings.principals_dir, p, "allow", ["carol"], by="operator")
    first = h.request(p, artifact="Plan: rename a column.")
    handle = await start_gate(h.client, first, h.task_queue)
    await wait_escalated(h.client, first.gate_id)
    with pytest.raises(VicarError, match="'mallory' may not answer"):
        await answer_gate(h.client, first.gate_id, HumanAnswer(action="approve", responder="mallory"))
    await answer_gate(h.client, first.gate_id, HumanAnswer(action="approve", responder="carol"))
    assert (await handle.result()).responder == "carol"

    change_allowed(h.settings.principals_dir, p, "anyone", by="operator")
    second = h.request(p, artifact="Plan: drop an unused table.")
    handle = await start_gate(h.client, second, h.task_queue)
    await wait_escalated(h.client, second.gate_id)
    await answer_gate(h.client, second.gate_id, HumanAnswer(action="reject", text="no", responder="mallory"))
    assert (await handle.result()).responder == "mallory"
