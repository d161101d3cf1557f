"""The MCP client configuration `vicar mcp --print-config` gives (docs/mcp.md) works as it
is written: the MCP SDK's stdio client, passing only the entry's command, args and env
(the client adds no more than HOME, PATH and a few), starts the server on a data dir of
its own and asks through a real worker. Without the entry's env the same server cannot
start: what a user met ("Connection closed")."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from vicar.client import add_rule


@pytest.fixture
async def worker(tmp_path, worker_process):
    w = worker_process(tmp_path / "worker")
    await w.start()
    yield w
    await w.stop(timeout=60)


async def printed_entry(worker, data_dir, principal: str) -> dict:
    env = {**worker.env, "VICAR_DATA_DIR": str(data_dir)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        "mcp",
        "--principal",
        principal,
        "--print-config",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err
    return json.loads(out)["mcpServers"]["vicar"]


async def test_the_printed_entry_starts_the_server_with_what_it_needs(temporal_env, worker, tmp_path):
    p = f"p-{uuid.uuid4().hex[:10]}"
    data_dir = tmp_path / "mcp-data"
    data_dir.mkdir()
    # The deployment's payload keys, where the entry's data dir has them (docs/codec.md).
    keys = data_dir / "codec-keys"
    keys.write_text(os.environ["VICAR_CODEC_KEYS"].replace(",", "\n") + "\n")
    keys.chmod(0o600)
    entry = await printed_entry(worker, data_dir, p)
    assert os.path.isabs(entry["command"]) and entry["args"][-2:] == ["--principal", p]
    assert entry["env"]["VICAR_DATA_DIR"] == str(data_dir) and "VICAR_CODEC_KEYS" not in json.dumps(entry)
    assert entry["env"]["VICAR_TASK_QUEUE"] == worker.task_queue and "TEMPORAL_ADDRESS" in entry["env"]
    await add_rule(
        temporal_env.client,
        p,
        dict(name="docs-ok", effect="approve", task_types=["docs"]),
        by=p,
        task_queue=worker.task_queue,
    )
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd=str(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("ask_approval", {"task_type": "docs", "question": "Publish the docs?"})
        assert not result.is_error and result.structured_content["answered_by"] == "rule"
    # The same entry without its env: the server finds no keys and cannot serve.
    bare = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(tmp_path))
    with pytest.raises(Exception):  # noqa: B017  (the SDK's client: the connection closes)
        async with stdio_client(bare) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 60)
