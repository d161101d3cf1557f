"""vicar.worker as a process: connects to the configured Temporal and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from vicar.client.gates import start_gate
from vicar.models import GateRequest

ROOT = Path(__file__).resolve().parents[1]


async def test_worker_process_serves_gates_and_stops_on_sigterm(temporal_env, settings):
    env = dict(
        os.environ,
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        VICAR_DATA_DIR=str(settings.data_dir),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.worker",
        env=env,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        req = GateRequest(
            principal="wkr",
            gate_id=f"worker-test-{os.getpid()}",
            state="WORK_ASSERT",
            task_type="docs",
            question="Approve?",
            escalation_mode="never",
        )
        handle = await start_gate(temporal_env.client, req)  # the default task queue
        result = await asyncio.wait_for(handle.result(), timeout=120)
        assert result.answered_by.value == "proxy" and result.n == 1
        assert (settings.data_dir / "principals" / "wkr" / "memory.db").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, out.decode()[-2000:]
    assert b"Traceback" not in out
