"""The hook tests' world: a real worker process on the Temporal dev server, the inbox served
by uvicorn with its hook endpoints, each test's principal with its own hook token, and the
ways an agent reaches Vicar: the thin command as a process, and Claude Code's HTTP hook."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio

from vicar.hooks import protocol as p
from vicar.hooks.http import hook_token
from vicar.hooks.tokens import principal_token
from vicar.settings import Settings
from vicar.settings.hook import HookParams

from .conftest import WorkerProcess, wait_for
from .inbox_world import free_port

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class HookWorld:
    client: Any
    app: Any
    base: str  # http://127.0.0.1:PORT
    settings: Settings
    worker: WorkerProcess
    token_file: Path = field(default=Path("/nonexistent"))

    def url(self, agent: str = p.CLAUDE_CODE) -> str:
        return f"{self.base}/hooks/{agent}"

    def configure(self, wait: float, single: bool = False, **settings: Any) -> str:
        """A principal of its own for one test, with its own hook token (this world's
        token_file), the hook waiting `wait` seconds for them. `single`: the first
        version's single token for VICAR_HOOK_PRINCIPAL instead."""
        principal = f"p-{uuid.uuid4().hex[:10]}"
        hook = HookParams(wait_seconds=wait, principal=principal if single else None)
        self.app.state.inbox.settings = self.settings.model_copy(update={"hook": hook, **settings})
        if single:
            _, file = hook_token(self.settings)
            assert file is not None
            self.token_file = file
        else:
            _, self.token_file = principal_token(self.settings, principal)
        return principal


def call(name: str, agent: str = p.CLAUDE_CODE, **changes: Any) -> dict:
    """A recorded input (tests/fixtures/<agent>/) with this test's own session and tool call."""
    data = json.loads((FIXTURES / agent.replace("-", "_") / f"{name}.json").read_text())
    data.update({"session_id": f"s-{uuid.uuid4().hex[:8]}", **changes})
    if "tool_use_id" in data and "tool_use_id" not in changes:
        data["tool_use_id"] = f"toolu_{uuid.uuid4().hex[:20]}"
    return data


async def command(
    w: HookWorld, data: dict, agent: str = p.CLAUDE_CODE, *extra: str, token_file: Path | None = None
) -> tuple[int, dict, str]:
    """The thin command as the agent runs it: (exit code, stdout JSON, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.hooks",
        agent,
        "--url",
        w.url(agent),
        "--token-file",
        str(token_file or w.token_file),
        *extra,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(data).encode()), 150)
    assert proc.returncode is not None
    return proc.returncode, json.loads(out), err.decode()


def post(w: HookWorld, data: dict, token: str | None = None, url: str | None = None) -> tuple[int, dict, dict]:
    """Claude Code's HTTP hook: the input POSTed with the bearer token: (status, JSON, headers)."""
    request = urllib.request.Request(
        url or w.url(),
        data=json.dumps(data).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token or w.token_file.read_text().strip()}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=150) as reply:
            return reply.status, json.loads(reply.read()), {k.lower(): v for k, v in reply.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), {}


async def escalated(client: Any, gate_id: str, timeout: float = 60) -> Any:
    """The gate's details once it waits for the person (the hook's process opens it first)."""
    return await wait_for(lambda: escalated_now(client, gate_id), timeout=timeout)


async def escalated_now(client: Any, gate_id: str) -> Any:
    from vicar.client.gates import gate_details
    from vicar.errors import NotFound

    try:
        d = await gate_details(client, gate_id)
    except NotFound:
        return None
    return d if d and d.status.value == "escalated" else None


async def polled(client: Any, task_queue: str) -> bool:
    """Whether a worker polls the task queue for workflow tasks."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    reply = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(reply.pollers)


@pytest_asyncio.fixture(scope="module")
async def world(temporal_env, tmp_path_factory):
    import uvicorn

    from vicar.inbox.app import create_app

    # The autonomy rule loosened as in bench/gate_bench.py (BENCH_ENV): the proxy earns the
    # right to answer alone within a few of the person's answers, and is never audited.
    worker = WorkerProcess(
        temporal_env,
        tmp_path_factory.mktemp("worker"),
        VICAR_OPS_ADDRESS=None,
        VICAR_AUTONOMY_TARGET_ERROR="0.8",
        VICAR_AUTONOMY_AUDIT_SHARE="0",
    )
    worker.env.pop("VICAR_METRICS_ADDRESS", None)
    await worker.start()
    # Polling before the first test: a hook while the worker still starts is answered
    # "Vicar's worker did not respond", as it should be.
    await wait_for(lambda: polled(temporal_env.client, worker.task_queue), timeout=120)
    settings = Settings(data_dir=tmp_path_factory.mktemp("inbox"), task_queue=worker.task_queue)
    app = create_app(settings, temporal_env.client)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    try:
        yield HookWorld(temporal_env.client, app, f"http://127.0.0.1:{port}", settings, worker)
    finally:
        server.should_exit = True
        await serving
        if worker.proc is not None and worker.proc.returncode is None:
            await worker.stop()
