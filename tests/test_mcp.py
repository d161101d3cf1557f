"""`vicar mcp` (issue 38 item 2): the MCP SDK's own client starts `vicar mcp` over stdio
and calls its tools against a real worker process on the real Temporal dev server. An
ask returns the answer when it comes within the caller's wait (the person's, the rule's),
otherwise a gate id that gate_status polls; the AskQuestion path returns the person's
text; bad arguments are one line; another principal's gate is no gate. Streamable HTTP
serves the same tools to the SDK's HTTP client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from vicar.client import add_rule
from vicar.client.gates import answer_gate, start_gate
from vicar.models import GateRequest, HumanAnswer

from .conftest import ROOT, wait_escalated, wait_for


@pytest.fixture
async def worker(tmp_path, worker_process):
    w = worker_process(tmp_path / "worker")
    await w.start()
    yield w
    await w.stop(timeout=60)


def _env(worker, tmp_path) -> dict[str, str]:
    # Its own data dir: the MCP server reaches the worker through Temporal only.
    return {**worker.env, "VICAR_DATA_DIR": str(tmp_path / "mcp")}


@asynccontextmanager
async def mcp_session(worker, tmp_path, principal: str):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vicar.cli", "mcp", "--principal", principal],
        env=_env(worker, tmp_path),
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def outcome(result) -> dict:
    assert not result.is_error, result.content
    data = result.structured_content
    assert data == json.loads(result.content[0].text) | {k: v for k, v in data.items() if v is None}
    return data


def error_line(result) -> str:
    assert result.is_error
    [content] = result.content
    assert "\n" not in content.text and "Traceback" not in content.text
    return content.text


async def escalated(client, gate_id: str):
    """The gate's details once it waits for the person (the MCP server may not have started it yet)."""
    from vicar.client.gates import gate_details
    from vicar.errors import NotFound

    async def waiting():
        try:
            d = await gate_details(client, gate_id)
        except NotFound:
            return None
        return d if d and d.status.value == "escalated" else None

    return await wait_for(waiting, timeout=60)


def principal() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


async def test_an_ask_returns_the_persons_answer_or_a_gate_id_to_poll(temporal_env, worker, tmp_path):
    client = temporal_env.client
    p = principal()
    async with mcp_session(worker, tmp_path, p) as mcp:
        names = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(names) == {"ask_approval", "ask_question", "gate_status"}
        assert names["ask_approval"].input_schema["properties"]["wait_seconds"]["maximum"] == 600
        assert "principal" not in names["ask_approval"].input_schema["properties"]  # fixed at start

        # The person answers within the wait: the tool returns their answer.
        call = asyncio.create_task(
            mcp.call_tool(
                "ask_approval",
                {
                    "gate_id": f"mcp-a-{p}",
                    "task_type": "db-migration",
                    "question": "Run the migration that drops the legacy column?",
                    "artifact_text": "ALTER TABLE users DROP COLUMN legacy;",
                    "wait_seconds": 60,
                },
            )
        )
        details = await escalated(client, f"mcp-a-{p}")
        assert details.principal == p and details.task_type == "db-migration"
        await answer_gate(client, f"mcp-a-{p}", HumanAnswer(action="reject", text="Keep it a release.", responder=p))
        got = outcome(await call)
        assert got["status"] == "answered" and got["action"] == "reject"
        assert (got["text"], got["answered_by"], got["responder"]) == ("Keep it a release.", "human", p)

        # No answer within the wait: a gate id, which gate_status polls.
        got = outcome(
            await mcp.call_tool(
                "ask_approval",
                {"task_type": "deploy", "question": "Deploy build 17 to production?", "wait_seconds": 0.5},
            )
        )
        assert got["status"] == "waiting" and got["action"] is None
        gate_id = got["gate_id"]
        assert gate_id.startswith("mcp-")
        await wait_escalated(client, gate_id)
        polled = outcome(await mcp.call_tool("gate_status", {"gate_id": gate_id}))
        assert polled["status"] == "waiting" and polled["waiting_for"] == "escalated"
        await answer_gate(client, gate_id, HumanAnswer(action="approve", text="Go.", responder=p))
        polled = outcome(await mcp.call_tool("gate_status", {"gate_id": gate_id, "wait_seconds": 30}))
        assert (polled["status"], polled["action"], polled["text"]) == ("answered", "approve", "Go.")

        # The AskQuestion path: the answer is the person's text.
        got = outcome(
            await mcp.call_tool(
                "ask_question",
                {"task_type": "db-migration", "question": "Keep the old column one release?", "wait_seconds": 0},
            )
        )
        assert got["status"] == "waiting"
        await wait_escalated(client, got["gate_id"])
        await answer_gate(client, got["gate_id"], HumanAnswer(action="answer", text="Yes, one.", responder=p))
        polled = outcome(await mcp.call_tool("gate_status", {"gate_id": got["gate_id"], "wait_seconds": 30}))
        assert (polled["action"], polled["text"], polled["answered_by"]) == ("answer", "Yes, one.", "human")


async def test_a_rule_answers_at_once_and_an_ask_is_idempotent(temporal_env, worker, tmp_path):
    client = temporal_env.client
    p = principal()
    rule = {"name": "docs-ok", "effect": "approve", "task_types": ["docs"], "text": "Docs go."}
    await add_rule(client, p, rule, by=p, task_queue=worker.task_queue)
    ask = {"gate_id": f"mcp-r-{p}", "task_type": "docs", "question": "Merge the README fix?", "wait_seconds": 60}
    async with mcp_session(worker, tmp_path, p) as mcp:
        got = outcome(await mcp.call_tool("ask_approval", ask))
        assert (got["status"], got["action"], got["answered_by"]) == ("answered", "approve", "rule")
        # The same call again (a retried tool call) attaches to the same gate.
        again = outcome(await mcp.call_tool("ask_approval", ask))
        assert again == got
        refused = error_line(await mcp.call_tool("ask_approval", {**ask, "question": "Another question?"}))
        assert "already exists with a different request" in refused


async def test_bad_arguments_and_other_peoples_gates_are_refused_in_one_line(temporal_env, worker, tmp_path):
    client = temporal_env.client
    p, other = principal(), principal()
    theirs = GateRequest(
        principal=other, gate_id=f"g-{other}", state="PLAN_ASSERT", task_type="deploy", question="Theirs?"
    )
    handle = await start_gate(client, theirs, worker.task_queue)
    await wait_escalated(client, theirs.gate_id)
    async with mcp_session(worker, tmp_path, p) as mcp:
        cases = {
            "question: String should have at most 4000 characters": {"task_type": "x", "question": "q" * 4001},
            "wait_seconds: Input should be less than or equal to 600": {
                "task_type": "x",
                "question": "q?",
                "wait_seconds": 3600,
            },
            "escalation_mode: Input should be 'when_unsure' or 'always'": {
                "task_type": "x",
                "question": "q?",
                "escalation_mode": "never",
            },
            "principal: Extra inputs are not permitted": {"task_type": "x", "question": "q?", "principal": other},
            "task_type: Field required": {"question": "q?"},
            "invalid gate_id": {"task_type": "x", "question": "q?", "gate_id": "../../etc"},
        }
        for expected, args in cases.items():
            assert expected in error_line(await mcp.call_tool("ask_approval", args)), expected
        assert "no tool 'rm_rf'" in error_line(await mcp.call_tool("rm_rf", {}))
        # Another principal's gate reads as no gate, and is left as it was.
        assert error_line(await mcp.call_tool("gate_status", {"gate_id": theirs.gate_id})) == (
            f"no gate {theirs.gate_id!r}"
        )
        assert error_line(await mcp.call_tool("gate_status", {"gate_id": "nothing-here"})) == "no gate 'nothing-here'"
        # One of its own gates, ended by someone without an answer: 'ended', never an answer to act on.
        mine = outcome(await mcp.call_tool("ask_approval", {"task_type": "x", "question": "q?", "wait_seconds": 0}))
        await escalated(client, mine["gate_id"])
        await client.get_workflow_handle(f"vicar-gate/{mine['gate_id']}").terminate("test")
        ended = outcome(await mcp.call_tool("gate_status", {"gate_id": mine["gate_id"], "wait_seconds": 10}))
        assert ended["status"] == "ended" and ended["action"] is None and "terminated" in ended["note"]
    await handle.terminate()


async def test_streamable_http_serves_the_same_tools_on_loopback_only(temporal_env, worker, tmp_path):
    from mcp.client.streamable_http import streamable_http_client

    from vicar.runtime.server import free_port

    p = principal()
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        "mcp",
        "--principal",
        p,
        "--http",
        f"127.0.0.1:{port}",
        env=_env(worker, tmp_path),
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def listening():
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            w.close()
            return True

        await wait_for(listening, timeout=60)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, *_),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            got = outcome(
                await mcp.call_tool("ask_question", {"task_type": "t", "question": "Which port?", "wait_seconds": 0})
            )
            assert got["status"] == "waiting"
            await wait_escalated(temporal_env.client, got["gate_id"])
            await answer_gate(
                temporal_env.client, got["gate_id"], HumanAnswer(action="answer", text="8080.", responder=p)
            )
            polled = outcome(await mcp.call_tool("gate_status", {"gate_id": got["gate_id"], "wait_seconds": 30}))
            assert polled["text"] == "8080."
    finally:
        proc.terminate()
        await proc.wait()
    refused = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        "mcp",
        "--principal",
        p,
        "--http",
        "0.0.0.0:8766",
        env={**os.environ, "VICAR_DATA_DIR": str(tmp_path / "x")},
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await refused.communicate()
    assert refused.returncode == 2 and "only a loopback address" in err.decode()


def test_without_the_mcp_extra_it_says_which_to_install(tmp_path):
    """`vicar mcp` where the SDK is not installed: one line naming the extra, exit 9."""
    import subprocess

    shadow = tmp_path / "not-installed" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('mcp is not installed (test)')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VICAR_")}
    env.update(PYTHONPATH=os.pathsep.join([str(shadow.parent), str(ROOT)]), VICAR_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "vicar.cli", "mcp", "--principal", "alice"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    assert "pip install 'vicar[mcp]'" in done.stderr and "Traceback" not in done.stderr
