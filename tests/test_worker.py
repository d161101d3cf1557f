"""vicar.worker as a process: connects to the configured Temporal and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from vicar.client.gates import start_gate
from vicar.models import GateRequest

ROOT = Path(__file__).resolve().parents[1]


async def test_worker_process_serves_gates_and_stops_on_sigterm(temporal_env, settings, worker_process):
    worker = worker_process(settings.data_dir, VICAR_TASK_QUEUE=None)  # the default task queue
    await worker.start()
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
        out = await worker.stop(timeout=60)
    assert worker.proc is not None and worker.proc.returncode == 0, out[-2000:]
    assert "Traceback" not in out
