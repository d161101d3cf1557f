"""Vicar's Temporal worker: the workflows and the client activities on the shared task
queue, and the memory's activities on the queues of the shards it serves (all of them
on the shared queue when unsharded, the default).

    python -m vicar.worker   # or: vicar worker [--shards 0-3]

Connects the SDK's usual way (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TLS / API key via
the environment or a config profile); with none configured it starts the embedded dev
server under the data directory, or joins the one another Vicar process runs there, and
starts it again if it goes away (vicar/runtime/embedded_watch.py).
One worker per data directory and task queue (a lock file under `workers/`).
SIGINT / SIGTERM shut it down gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from vicar import workflows as workflow_package
from vicar.activities.audit import AuditActivities
from vicar.activities.consolidation import ConsolidationActivities
from vicar.activities.move import MoveActivities
from vicar.activities.notify import NotifyActivities
from vicar.activities.proxy import ProxyActivities
from vicar.activities.session import SessionActivities
from vicar.errors import Conflict, SettingsError, VicarError
from vicar.memory.embedder import make_embedder
from vicar.memory.registry import MemoryRegistry
from vicar.models.brain import BrainConfig
from vicar.proxy.provider import Predictor
from vicar.proxy.select import predictor_from_env
from vicar.runtime import ops
from vicar.runtime.bytecode import compile_package
from vicar.runtime.connect import connect, ensure_search_attributes
from vicar.runtime.embedded_watch import EmbeddedWatch
from vicar.runtime.locks import WorkerLock
from vicar.runtime.logging_redact import install as install_redaction
from vicar.runtime.server import SharedServer, env_configured, use_embedded
from vicar.runtime.shard_claims import Announcement, check_claims, worker_identity
from vicar.runtime.sharding import shard_queue
from vicar.settings import TASK_QUEUE, Settings, debugging
from vicar.workflows.audit import AuditWorkflow, ReviewWorkflow
from vicar.workflows.brain import BrainWorkflow
from vicar.workflows.consolidation import ConsolidationWorkflow
from vicar.workflows.foreign import ForeignWorkflow
from vicar.workflows.gate import GateWorkflow
from vicar.workflows.move import MoveWorkflow
from vicar.workflows.session import SessionWorkflow

log = logging.getLogger("vicar.worker")
# Every workflow a Vicar worker runs: build_worker registers these, and the replayer test
# (tests/test_replay_histories.py) replays the recorded histories against the same list.
WORKFLOWS: tuple[type, ...] = (
    GateWorkflow,
    BrainWorkflow,
    SessionWorkflow,
    ConsolidationWorkflow,
    MoveWorkflow,
    AuditWorkflow,
    ReviewWorkflow,
)


class WorkerGroup:
    """The shared queue's worker and one worker per served shard, run together (one
    process, one memory registry)."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def task_queue(self) -> str:
        return self.workers[0].task_queue

    async def __aenter__(self) -> "WorkerGroup":
        async with contextlib.AsyncExitStack() as stack:
            for w in self.workers:
                await stack.enter_async_context(w)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._stack:
            await self._stack.__aexit__(*exc)


def build_worker(
    client: Client,
    settings: Settings,
    *,
    predictor: Predictor | None = None,
    registry: MemoryRegistry | None = None,
    brain_config: BrainConfig | None = None,
    task_queue: str = TASK_QUEUE,
    max_threads: int = 16,
    shards: list[int] | None = None,
) -> tuple[Worker | WorkerGroup, MemoryRegistry]:
    """Unsharded (settings.shard_count None): one worker doing everything. Sharded: a
    WorkerGroup serving `shards` (default: settings.served_shards())."""
    # Import chromadb here, on the main thread, not first inside eight activity threads
    # at once (a hang was seen once when the first gates of 8 principals arrived together).
    import chromadb  # noqa: F401

    compile_package(Path(workflow_package.__file__).parent, settings.data_dir / "pycache")

    if registry is None:
        embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
        registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    predictor = predictor or predictor_from_env(settings, registry)
    served = (settings.served_shards() if shards is None else shards) if settings.shard_count is not None else []
    acts = ProxyActivities(
        client,
        registry,
        predictor,
        settings,
        brain_config=brain_config,
        task_queue=task_queue,
        served_shards=served,
    )
    sessions = SessionActivities(client, registry, settings, task_queue)
    consolidations = ConsolidationActivities(registry, settings, predictor)
    moves = MoveActivities(client, registry, settings, forget=predictor.forget)
    notices = NotifyActivities(settings)
    audits = AuditActivities(client, registry, settings)
    grace = timedelta(seconds=settings.ops.shutdown_grace_seconds)
    executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="vicar-act")
    # Vicar's workflows, and the refusal of any other type started at one of Vicar's ids.
    workflows = [*WORKFLOWS, ForeignWorkflow]
    shared = acts.shared() + sessions.shared() + moves.shared() + notices.shared() + audits.shared()
    memory = acts.memory() + sessions.memory() + consolidations.memory() + moves.memory() + audits.memory()
    # An identity that survives restarts and says the shard count, for vicar.runtime.shard_claims.
    identity = worker_identity(settings.data_dir, settings.shard_count)
    if settings.shard_count is None:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=workflows,
            activities=shared + memory,
            activity_executor=executor,
            max_concurrent_activities=max_threads,
            graceful_shutdown_timeout=grace,
            identity=identity,
        )
        return worker, registry
    shared_worker = Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=shared,
        max_concurrent_activities=max_threads,
        graceful_shutdown_timeout=grace,
        identity=identity,
    )
    return WorkerGroup(
        [shared_worker]
        + [
            Worker(
                client,
                task_queue=shard_queue(task_queue, k),
                activities=memory,
                activity_executor=executor,
                max_concurrent_activities=max_threads,
                graceful_shutdown_timeout=grace,
                identity=identity,
            )
            for k in served
        ]
    ), registry


@contextlib.asynccontextmanager
async def temporal_client(
    settings: Settings, *, embedded: bool | None = None, runtime=None
) -> AsyncIterator[tuple[Client, SharedServer | None]]:
    """A client to the configured Temporal, or to the data directory's embedded server
    (started here unless another process runs it; it stays up while any process uses it)."""
    server = None
    target = None
    if embedded if embedded is not None else not env_configured():
        server = await asyncio.to_thread(use_embedded, settings.data_dir, ports=settings.server)
        target = server.address
    try:
        client = await connect(settings, target_host=target, runtime=runtime, worker=True)
        await ensure_search_attributes(client)
        yield client, server
    finally:
        if server:
            await asyncio.to_thread(server.close)


@contextlib.contextmanager
def stop_on_signals():
    """An Event that Ctrl-C or SIGTERM sets: the normal end of a long-running command,
    not an interruption. The loop's handlers are removed on exit."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def serve(settings: Settings, on_ready=None, command: str = "python -m vicar.worker") -> None:
    # Before the server: a second worker on this data, or on one of its shards, stops
    # here, starting nothing.
    with stop_on_signals() as stop, contextlib.ExitStack() as locks:
        for queue in [settings.task_queue, *(shard_queue(settings.task_queue, k) for k in settings.served_shards())]:
            locks.enter_context(WorkerLock(settings.data_dir, queue, command))
        # vicar/runtime/ops.py: /healthz, /readyz and the SDK's Prometheus /metrics (when configured).
        async with ops.serving(settings.ops) as surface:
            server = None
            if not env_configured():
                server = await asyncio.to_thread(use_embedded, settings.data_dir, ports=settings.server)
            try:
                while not await _serve_on(settings, surface, stop, server, on_ready):
                    on_ready = None  # said at the first start only
                    assert server is not None
                    log.warning("connecting again to the embedded Temporal server, now on %s", server.address)
            finally:
                if server:
                    await asyncio.to_thread(server.close)


async def _serve_on(settings: Settings, surface, stop: asyncio.Event, server: SharedServer | None, on_ready) -> bool:
    """Serve until stopped (True), or until the embedded server is back on another
    address after its keeper died (False: the caller connects again; EmbeddedWatch).
    Conflict if another worker that may not serve beside this one claimed the queue first."""
    client = await connect(
        settings, target_host=server.address if server else None, runtime=surface.runtime, worker=True
    )
    await ensure_search_attributes(client)
    identity = worker_identity(settings.data_dir, settings.shard_count)
    served = settings.served_shards() if settings.shard_count is not None else []
    # Another machine serving this queue unsharded, with another shard count, or one of
    # these shards: stop before polling. One that starts at the same moment is seen by
    # the claims both announce (vicar/runtime/shard_claims.py).
    await check_claims(client, settings.task_queue, [shard_queue(settings.task_queue, k) for k in served], identity)
    async with Announcement(client, settings.task_queue, identity, served) as claim:
        await claim.check()
        worker, registry = build_worker(client, settings, task_queue=settings.task_queue)
        # Load the embedding model before taking work, not inside the first activity.
        await asyncio.to_thread(make_embedder, params=settings.embedder)
        if on_ready:
            on_ready(client, server)
        try:
            async with worker:
                surface.watch(client, *getattr(worker, "workers", [worker]))  # ready: model loaded, worker polling
                stopped = await _until_ended(settings, stop, server, claim)
                if stopped:
                    surface.stopping()  # /readyz says 503 while running activities finish
                    log.info(
                        "shutting down: finishing running activities (at most %g s)",
                        settings.ops.shutdown_grace_seconds,
                    )
        finally:
            registry.close()
    return stopped


async def _until_ended(
    settings: Settings, stop: asyncio.Event, server: SharedServer | None, claim: Announcement
) -> bool:
    """True once stopped; False once the embedded server is back on another address;
    Conflict once an earlier worker's clashing claim shows."""
    waits = {"stop": asyncio.ensure_future(stop.wait()), "lost": asyncio.ensure_future(claim.lost())}
    if server is not None:  # a configured Temporal: the SDK connects again when it returns
        waits["moved"] = asyncio.ensure_future(EmbeddedWatch(server, settings.data_dir, settings.server).moved())
    try:
        await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits.values():
            task.cancel()
    if stop.is_set():
        return True
    lost = waits["lost"]
    if lost.done() and not lost.cancelled() and isinstance(conflict := lost.result(), Conflict):
        raise conflict  # stops this worker, in one line (exit 5), the earlier one serving on
    return False


class OneLineErrors(logging.Formatter):
    """The SDK logs every failed activity attempt with its traceback, including the
    expected ones (the server restarting, a broken store, a refused path) that Temporal
    retries or the gate turns into an escalation. The worker's log keeps one line per
    failure, the exception chain's types and messages; VICAR_DEBUG=1 shows tracebacks."""

    def formatException(self, ei) -> str:
        exc, parts, seen = ei[1], [], set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            parts.append(f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__)
            exc = exc.__cause__ or exc.__context__
        return "  <- ".join(parts)

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", " | ")


def configure_logging() -> None:
    handler = logging.StreamHandler()
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    debug = debugging()
    handler.setFormatter(logging.Formatter(fmt) if debug else OneLineErrors(fmt))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    install_redaction()  # httpx logs the webhook's URL, token included, at INFO


def main() -> None:
    from vicar.runtime.ending import end_process

    configure_logging()
    try:
        asyncio.run(serve(Settings.from_env()))
        code = 0
    except VicarError as exc:
        for line in exc.lines if isinstance(exc, SettingsError) else [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        code = exc.exit_code
    end_process(code)  # stopped or refused: everything is closed, no teardown to abort


if __name__ == "__main__":
    main()
