"""The embedded Temporal server's ports are settings (issue 37 item 9): two Vicars with
their own data directories and VICAR_SERVER_* ports run their servers at once on one
machine, each serving gRPC, the web UI, the HTTP API and /metrics where it was told to;
a port that was asked for and is taken is one line and exit code 2, not a silent move.
Real processes: each Vicar a Python process holding its data directory's server
(vicar.runtime.server.use_embedded: the keeper and the Temporal dev server under it)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from vicar.runtime.server import free_port
from vicar.settings import Settings

# Holds the data directory's embedded server with the settings of its environment,
# prints the keeper's note, and lets go when its stdin closes.
HOLDER = """
import json, sys
from vicar.errors import VicarError
from vicar.runtime.server import use_embedded
from vicar.settings import Settings
s = Settings.from_env()
try:
    server = use_embedded(s.data_dir, ports=s.server)
except VicarError as exc:
    print(exc, file=sys.stderr)
    sys.exit(exc.exit_code)
print(json.dumps(server.note), flush=True)
sys.stdin.read()
server.close()
"""


def _env(data_dir: Path, **ports: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VICAR_SERVER_", "TEMPORAL_"))}
    env["VICAR_DATA_DIR"] = str(data_dir)
    env |= {f"VICAR_SERVER_{k.upper()}": str(v) for k, v in ports.items()}
    return env


def _holder(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read(200_000).decode("utf-8", "replace")


async def _serves(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from temporalio.client import Client

    client = await Client.connect(address)
    return (await client.workflow_service.get_system_info(GetSystemInfoRequest())) is not None


def test_two_vicars_share_a_machine_on_the_ports_they_are_given(tmp_path):
    ports = [dict(port=free_port(), ui_port=free_port(), http_port=free_port(), metrics_port=free_port()) for _ in "ab"]
    assert len({p for ps in ports for p in ps.values()}) == 8
    holders = [_holder(_env(tmp_path / name, **p)) for name, p in zip("ab", ports)]  # both start at once
    try:
        notes = []
        for h in holders:
            line = h.stdout.readline()
            assert line, h.stderr.read()
            notes.append(json.loads(line))
        for note, p in zip(notes, ports):
            assert note["address"] == f"127.0.0.1:{p['port']}"
            assert note["ports"] == p
            assert asyncio.run(_serves(note["address"]))
            status, page = _get(f"http://127.0.0.1:{p['ui_port']}/")
            assert status == 200 and "<html" in page.lower()
            status, body = _get(f"http://127.0.0.1:{p['http_port']}/api/v1/namespaces")
            assert status == 200 and "default" in body
            status, metrics = _get(f"http://127.0.0.1:{p['metrics_port']}/metrics")
            assert status == 200 and "# TYPE" in metrics
        assert notes[0]["server_pid"] != notes[1]["server_pid"]
    finally:
        for h in holders:
            h.stdin.close()
        for h in holders:
            h.wait(60)
    for p in ports:  # each let go of its ports when its last user left
        for port in p.values():
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))


def test_a_taken_port_that_was_asked_for_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        h = _holder(_env(tmp_path / "c", port=port))
        out, err = h.communicate(timeout=120)
    assert h.returncode == 2, (out, err)
    assert err.strip().count("\n") == 0 and f"VICAR_SERVER_PORT {port} is in use" in err, err


def test_the_ports_are_validated_settings():
    assert Settings(data_dir=Path("/tmp/x")).server.port is None  # 7233, or a free one if taken
    with pytest.raises(Exception, match="VICAR_SERVER_UI_PORT"):
        os.environ["VICAR_SERVER_UI_PORT"] = "70000"
        try:
            Settings.from_env()
        finally:
            del os.environ["VICAR_SERVER_UI_PORT"]


@pytest.mark.system  # the keeper and the server are processes, started outside tests/
async def test_the_worker_and_the_cli_use_the_ports_set(tmp_path):
    """`vicar worker`'s client (vicar.worker.temporal_client) starts the server on the
    ports set, and the CLI's connection (connect_config) looks for it there."""
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

    from vicar.runtime.connect import connect_config
    from vicar.settings import ServerPorts
    from vicar.worker import temporal_client

    ports = ServerPorts(port=free_port(), ui_port=free_port(), http_port=free_port(), metrics_port=free_port())
    settings = Settings(data_dir=tmp_path / "vicar", server=ports)
    assert connect_config(settings)["target_host"] == f"127.0.0.1:{ports.port}"  # no server yet: where it would be
    async with temporal_client(settings, embedded=True) as (client, server):
        assert server is not None and server.address == f"127.0.0.1:{ports.port}"
        assert server.note["ports"] == ports.model_dump()
        assert server.ui_url == f"http://127.0.0.1:{ports.ui_port}"
        assert await client.workflow_service.get_system_info(GetSystemInfoRequest()) is not None


def test_the_codec_server_admits_the_ui_on_the_port_set():
    """`vicar codec-server`'s default CORS origins follow VICAR_SERVER_UI_PORT: the
    embedded UI moved to another port still decodes sealed payloads."""
    from vicar.runtime.codec_server import default_origins
    from vicar.settings import ServerPorts

    assert default_origins(Settings(data_dir=Path("/tmp/x"))) == ("http://localhost:8233", "http://127.0.0.1:8233")
    moved = Settings(data_dir=Path("/tmp/x"), server=ServerPorts(ui_port=8301))
    assert default_origins(moved) == ("http://localhost:8301", "http://127.0.0.1:8301")
