"""Shared fixtures: a real Temporal dev server, the real embedding model, real Chroma."""

from __future__ import annotations

import os

# A developer's API key must not turn the suite into paid LLM calls: the offline
# predictor unless a test picks another (the LLM tests talk to local stand-ins).
os.environ["VICAR_PREDICTOR"] = "offline"
# One payload key for the session, inherited by the worker and CLI processes the tests
# start, as a deployment gives its processes the same keys (docs/codec.md).
from vicar.runtime.codec import data_converter, new_key_line  # noqa: E402

os.environ.setdefault("VICAR_CODEC_KEYS", new_key_line("test"))

import asyncio
import getpass
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from vicar.memory.chunk import MemoryChunk
from vicar.memory.embedder import default_embedder
from vicar.memory.registry import MemoryRegistry
from vicar.models import GateRequest
from vicar.models.brain import BrainConfig
from vicar.runtime.server import temporal_binary
from vicar.settings import AutonomyParams, CalibrationParams, MemoryParams, Settings
from vicar.workflows import search_attributes as sa

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def embedder():
    return default_embedder()


@pytest_asyncio.fixture(scope="session")
async def temporal_env():
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        search_attributes=sa.ALL,
        data_converter=data_converter(),  # sealed payloads, like Vicar's own clients
        dev_server_log_level="error",
    )
    try:
        yield env
    finally:
        await env.shutdown()


# A loose autonomy rule for the tests about other things: two agreeing human answers
# prove an error <= 0.8 (at delta 0.05), and nothing is audited, so the proxy acts
# after a few answers and never at random. The rule itself is tested at its defaults
# and tighter targets (test_autonomy.py, test_gate_guards.py, test_llm_gate.py).
LOOSE_AUTONOMY = AutonomyParams(target_error=0.8, audit_share=0.0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "vicar", calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY))


# The names the tests answer gates as. Nobody but a principal itself answers for it until
# an operator lets others in (closed by default, docs/identity.md): the harness's
# principals let these in, as an operator would; a test of the closed default asks for a
# principal without a list.
# (`vicar answer` from a test answers as the OS user.)
TEST_RESPONDERS = (
    *("alice", "bob", "carol", "dan", "ada", "ann", "bo", "t", "test", "tester", "orchestrator", "cli"),
    getpass.getuser(),
)


def let_test_responders_in(principals_dir: Path, *principals: str) -> None:
    """The allow-lists of `principals` (in this data directory's principals) name
    TEST_RESPONDERS and the principal itself (a list names everyone who may answer)."""
    from vicar.responders import save_allowed

    for p in principals:
        save_allowed(principals_dir, p, [*TEST_RESPONDERS, p])


class VicarHarness:
    def __init__(self, client, task_queue: str, registry: MemoryRegistry, settings: Settings):
        self.client = client
        self.task_queue = task_queue
        self.registry = registry
        self.settings = settings

    def principal(self, *, responders: tuple[str, ...] | None = TEST_RESPONDERS) -> str:
        """A new principal, whose allow-list lets `responders` and itself answer (None: no
        list, so only the principal's own name answers for it: vicar/responders.py)."""
        from vicar.responders import save_allowed

        name = f"p-{uuid.uuid4().hex[:10]}"
        if responders:
            save_allowed(self.settings.principals_dir, name, [*responders, name])
        return name

    def request(self, principal: str, task_type: str = "db-migration", artifact: str = "", **kw) -> GateRequest:
        return GateRequest(
            principal=principal,
            gate_id=kw.pop("gate_id", f"g-{uuid.uuid4().hex[:12]}"),
            state=kw.pop("state", "PLAN_ASSERT"),
            task_type=task_type,
            question=kw.pop("question", "Approve or revise the proposed plan."),
            artifact_text=artifact,
            **kw,
        )


@pytest_asyncio.fixture
async def harness(temporal_env, embedder, settings, request):
    """A worker on its own task queue with its own data directory."""
    from vicar.worker import build_worker

    brain_config = getattr(request, "param", None) or BrainConfig()
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(
        temporal_env.client, settings, registry=registry, brain_config=brain_config, task_queue=task_queue
    )
    async with worker:
        yield VicarHarness(temporal_env.client, task_queue, registry, settings)
    registry.close()


async def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(interval)


async def wait_escalated(client, gate_id: str):
    """The gate's details once it waits for a human."""
    from vicar.client.gates import gate_details
    from vicar.models import GateStatus

    async def escalated():
        d = await gate_details(client, gate_id)
        return d if d and d.status is GateStatus.escalated else None

    return await wait_for(escalated)


@workflow.defn(name="DeafGate", sandboxed=False)
class DeafGate:
    """Takes a turn and never gives it back, like a gate whose worker died."""

    def __init__(self) -> None:
        self.granted = False

    @workflow.signal
    def turn_granted(self, grant) -> None:
        self.granted = True

    @workflow.query
    def has_turn(self) -> bool:
        return self.granted

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def record_answer(
    memory,
    request: GateRequest,
    n: int,
    action: str,
    text: str = "",
    *,
    by: str = "human",
    score: float = 0.5,
    predicted: str = "approve",
    **record,
) -> str:
    """Store a gate's answer the way the gate does (record_outcome), the proxy having
    predicted `predicted` at `score` in both passes; `record`: more OutcomeRecord fields,
    or `params` / `facts` for record_outcome. Returns the chunk id."""
    from vicar.models import Action, AnsweredBy, OutcomeRecord, PassResult
    from vicar.proxy.outcomes import record_outcome

    options = {k: record.pop(k) for k in ("params", "facts") if k in record}
    guess = PassResult(prose="", confidence=score, action=Action(predicted))
    chunk_id = record_outcome(
        memory,
        OutcomeRecord(
            request=request,
            n=n,
            workflow_id=f"vicar-gate/{request.gate_id}",
            action=Action(action),
            response_text=text,
            answered_by=AnsweredBy(by),
            prior=guess,
            posterior=guess,
            **record,
        ),
        artifacts=False,
        **options,
    )
    memory.raise_counter(n)
    return chunk_id


@pytest.fixture
def memory(tmp_path, embedder):
    """A fresh memory of principal alice."""
    from vicar.memory.principal import PrincipalMemory

    mem = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    yield mem
    mem.close()


def docs_chunk(i: int, principal: str = "alice") -> MemoryChunk:
    """The human's approval of doc change i, at interaction i: what the memory tests
    record by the handful."""
    return MemoryChunk(
        id=f"c{i}",
        principal=principal,
        state="PLAN_ASSERT",
        task_type="docs",
        outcome="approve",
        answered_by="human",
        question=f"Approve doc change {i}?",
        human_response="ok",
        created_n=i,
        traces=[i],
    )


async def vicar_process(h, data_dir, *args: str, queue: str | None = None) -> tuple[int, str, str]:
    """`vicar ARGS` in its own process: the harness's Temporal server, codec key
    (inherited) and task queue (or `queue`), but its own data directory, so it reaches
    the worker only through Temporal. (exit code, stdout, stderr)"""
    import asyncio
    import os
    import sys

    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": h.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": queue or h.task_queue,
        "VICAR_DATA_DIR": str(data_dir),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


class WorkerProcess:
    """`python -m vicar.worker` (or `start(*argv)`) against the test Temporal server: the one
    way the tests start a worker process. Its own task queue and ops and metrics endpoints on
    free loopback ports; `env` adds variables, a None value removes one (VICAR_TASK_QUEUE=None:
    the default queue)."""

    def __init__(self, temporal_env, data_dir: Path, **env: str | None) -> None:
        from vicar.runtime.server import free_port

        self.ops = f"127.0.0.1:{free_port()}"
        self.metrics = f"127.0.0.1:{free_port()}"
        self.env = dict(
            os.environ,
            TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
            VICAR_DATA_DIR=str(data_dir),
            VICAR_TASK_QUEUE=f"tq-w-{uuid.uuid4().hex[:8]}",
            VICAR_OPS_ADDRESS=self.ops,
            VICAR_METRICS_ADDRESS=self.metrics,
        )
        for name, value in env.items():
            if value is None:
                self.env.pop(name, None)
            else:
                self.env[name] = value
        self.task_queue = self.env.get("VICAR_TASK_QUEUE", "")
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, *argv: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *(argv or ("-m", "vicar.worker")),
            env=self.env,
            cwd=str(ROOT),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )

    async def get(self, path: str) -> tuple[int, str]:
        base = self.metrics if path == "/metrics" else self.ops
        return await asyncio.to_thread(http_get, f"http://{base}{path}")

    async def until(self, path: str, status: int, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got, body = await self.get(path)
            if got == status:
                return body
            assert self.proc is not None and self.proc.returncode is None, "the worker exited"
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{path} never answered {status}")

    async def stop(self, timeout: float = 90.0) -> str:
        """SIGTERM (a graceful stop), then its whole output."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(self.proc.communicate(), timeout=timeout)
        return out.decode()


@pytest_asyncio.fixture
async def worker_process(temporal_env):
    """`worker_process(data_dir, **env)`: a WorkerProcess, killed at teardown if a failed test
    left it running (a stray worker would keep polling the shared server). Without the ops
    and metrics endpoints unless `env` names them: the tests that use it never had them, and
    with them test_codec_keys' worker left test_codec_rotation's listing empty (not understood)."""
    made: list[WorkerProcess] = []

    def make(data_dir: Path, **env: str | None) -> WorkerProcess:
        env = {"VICAR_OPS_ADDRESS": None, "VICAR_METRICS_ADDRESS": None, **env}
        made.append(WorkerProcess(temporal_env, data_dir, **env))
        return made[-1]

    yield make
    for worker in made:
        if worker.proc is not None and worker.proc.returncode is None:
            worker.proc.kill()
            await worker.proc.wait()


def http_get(url: str) -> tuple[int, str]:
    """(status, body) of a GET; 0 when nothing answers."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def rule_for(memory, request: GateRequest, params=None):
    """The autonomy rule a gate's consult reads for `request` (vicar.proxy.autonomy)."""
    from vicar.proxy.autonomy import rule_in_force
    from vicar.settings import CalibrationParams

    params = params or CalibrationParams()
    return rule_in_force(
        memory.store, memory.dir, params.autonomy, request.state.value, request.kind.value, request.task_type
    )


# The tiers (unit, workflow, system), the fast-first order and the stop after a failed tier.
from .tiers import (  # noqa: E402, F401  (pytest finds hooks by name in this module)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_terminal_summary,
)
