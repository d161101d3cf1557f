"""The embedded Temporal server lives as long as any Vicar process uses it: stopping the
worker leaves it up for `vicar inbox` and `vicar codec-server` on the same data
directory, and it stops after the last of them. A worker whose server went away (the
server killed, or its keeper with it) gets it back on the same address and serves on,
without a restart. Real processes: `vicar worker`, `vicar inbox`, `vicar codec-server`,
the keeper and the dev server, on a data directory and ports of their own."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from vicar.runtime.locks import held
from vicar.runtime.server import free_port, reachable

from .conftest import WorkerProcess
from .inbox_process import InboxProcess

pytestmark = pytest.mark.soak


def embedded_env(data: Path) -> dict[str, str | None]:
    """No Temporal configured: the data directory's embedded server, on ports of its own."""
    return {
        "TEMPORAL_ADDRESS": None,
        "VICAR_DATA_DIR": str(data),
        "VICAR_SERVER_PORT": str(free_port()),
        "VICAR_SERVER_UI_PORT": str(free_port()),
    }


def servers_of(data: Path) -> list[int]:
    """Pids of the dev servers running on this data directory's database."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in cmd and str(data / "temporal" / "temporal.db").encode() in cmd:
            out.append(int(pid))
    return out


async def until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := await asyncio.to_thread(predicate):
            return got
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {timeout:g} s: {what}")


def keeper_note(data: Path) -> dict | None:
    """The keeper's note while a keeper runs (None: no keeper)."""
    lock = data / "temporal" / "keeper.lock"
    if not held(lock):
        return None
    try:
        return json.loads(lock.read_text() or "{}")
    except ValueError:
        return {}


def up(data: Path) -> bool:
    note = keeper_note(data)
    return bool(note and note.get("address") and reachable(note["address"]))


async def run_a_gate(address: str, queue: str, data: Path) -> str:
    """A gate started and answered (by its principal) through the server at `address`; its action."""
    from temporalio.client import Client

    from vicar.client.gates import answer_gate, gate_details, start_gate
    from vicar.models import GateRequest, GateStatus, HumanAnswer
    from vicar.runtime.codec import data_converter
    from vicar.settings import Settings

    from .conftest import wait_for

    client = await Client.connect(address, data_converter=data_converter(Settings(data_dir=data)))
    p = f"p-{uuid.uuid4().hex[:8]}"
    req = GateRequest(
        principal=p, gate_id=f"g-{uuid.uuid4().hex[:10]}", state="PLAN_ASSERT", task_type="t", question="Go?"
    )
    handle = await start_gate(client, req, queue)

    async def escalated():
        d = await gate_details(client, req.gate_id)
        return d if d and d.status is GateStatus.escalated else None

    await wait_for(escalated, timeout=90)
    await answer_gate(client, req.gate_id, HumanAnswer(action="approve", text="ok", responder=p))
    return (await asyncio.wait_for(handle.result(), 90)).action.value


async def test_the_server_outlives_the_worker_while_the_inbox_and_codec_server_use_it(temporal_env, tmp_path):
    data = tmp_path / "vicar"
    env = embedded_env(data)
    worker = WorkerProcess(temporal_env, data, **env)
    inbox = InboxProcess({**env, "VICAR_TASK_QUEUE": worker.task_queue}, tmp_path / "inbox.log")
    codec = None
    try:
        await worker.start()
        await worker.until("/readyz", 200, timeout=120)
        await inbox.start()
        codec_env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        codec = subprocess.Popen(
            [sys.executable, "-m", "vicar.cli", "codec-server", "--port", "0"],
            env=codec_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(3)  # the codec server holds its use from its start
        assert codec.poll() is None
        out = await worker.stop()
        assert worker.proc is not None and worker.proc.returncode == 0, out
        for _ in range(10):  # the keeper would have stopped it within a second
            assert up(data), "the embedded server stopped with the worker"
            await asyncio.sleep(0.5)
        assert (await asyncio.to_thread(lambda: __import__("httpx").get(f"{inbox.base}/signin"))).status_code == 200
        inbox.stop()
        await asyncio.sleep(3)
        assert up(data), "the embedded server stopped with the inbox, under the codec server"
        codec.send_signal(signal.SIGTERM)
        codec.wait(30)
        await until(lambda: not servers_of(data) and keeper_note(data) is None, 30, "the last user gone, no server")
    finally:
        inbox.stop()
        if codec is not None and codec.poll() is None:
            codec.kill()
        if worker.proc is not None and worker.proc.returncode is None:
            worker.proc.kill()
            await worker.proc.wait()


async def test_a_worker_gets_its_embedded_server_back_after_a_kill(temporal_env, tmp_path):
    """SIGKILL of the server: its keeper starts it again on the same address. SIGKILL of
    the keeper (the server dies with it): the worker starts another. Each time the same
    worker serves the next gate, never restarted."""
    data = tmp_path / "vicar"
    env = embedded_env(data)
    worker = WorkerProcess(temporal_env, data, **env)
    try:
        await worker.start()
        await worker.until("/readyz", 200, timeout=120)
        note = keeper_note(data)
        assert note and note.get("address")
        address = note["address"]
        assert await run_a_gate(address, worker.task_queue, data) == "approve"

        os.kill(note["server_pid"], signal.SIGKILL)
        await until(
            lambda: (n := keeper_note(data)) and n.get("server_pid") not in (None, note["server_pid"]),
            60,
            "the keeper started the server again",
        )
        assert keeper_note(data)["address"] == address
        await until(lambda: up(data), 60, "the server back")
        assert await run_a_gate(address, worker.task_queue, data) == "approve"

        again = keeper_note(data)
        os.kill(again["keeper_pid"], signal.SIGKILL)
        await until(
            lambda: (
                (n := keeper_note(data)) and n.get("keeper_pid") not in (None, again["keeper_pid"]) and n.get("address")
            ),
            90,
            "the worker started another keeper",
        )
        assert keeper_note(data)["address"] == address
        assert await run_a_gate(address, worker.task_queue, data) == "approve"
        assert worker.proc is not None and worker.proc.returncode is None  # the same worker, never restarted
        out = await worker.stop()
        assert "starting it again" in out, out[-3000:]
        await until(lambda: not servers_of(data), 30, "no server once the worker stopped")
    finally:
        if worker.proc is not None and worker.proc.returncode is None:
            worker.proc.kill()
            await worker.proc.wait()
