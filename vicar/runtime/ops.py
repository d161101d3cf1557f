"""The worker's operational HTTP surface: liveness, readiness and Prometheus metrics.

- `/healthz` on VICAR_OPS_ADDRESS: 200 while the process's event loop answers.
- `/readyz` there: 200 once the worker is connected to Temporal (a health RPC, cached
  for a second), polling its task queue and has its embedding model loaded; 503 before,
  when Temporal stops answering, and from the moment shutdown begins, so a load
  balancer or the kubelet stops counting on a worker that is draining.
- `/metrics` on VICAR_METRICS_ADDRESS: the SDK runtime's own Prometheus exporter. Its
  metrics (workflow and activity task latencies, pollers, ...) and Vicar's gate metrics
  (workflows/metrics.py, reported through the workflow metric meter) share it, so
  there is one endpoint to scrape and no second metrics library.

Both are off unless configured (vicar.settings.OpsParams says why). The HTTP server is the
standard library's asyncio streams: two GET routes, no dependency for them.

    python -m vicar.runtime.ops probe /readyz    # exit 0 when ready: the container HEALTHCHECK
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from vicar.errors import Conflict, InvalidInput, SettingsError
from vicar.settings import OPS_VARS, OpsParams, Settings
from vicar.workflows.metrics import BUCKETS

if TYPE_CHECKING:
    from temporalio.client import Client

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
TEMPORAL_CHECK_TTL = 1.0  # seconds a Temporal health answer is reused: probes cannot flood the server
TEMPORAL_CHECK_TIMEOUT = timedelta(seconds=3)
REQUEST_LIMIT = 8192  # bytes of request head read; the routes need only the first line
REQUEST_TIMEOUT = 5.0


class Readiness(BaseModel):
    """The /readyz body: each check, and why not when one fails."""

    ready: bool
    temporal: bool
    polling: bool
    model_loaded: bool
    shutting_down: bool


def make_runtime(ops: OpsParams) -> Runtime | None:
    """An SDK runtime exporting Prometheus metrics on ops.metrics_address, or None (the
    SDK's default runtime, no metrics). Clients and workers must be created with it."""
    if not ops.metrics_address:
        return None
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=ops.metrics_address, histogram_bucket_overrides=BUCKETS)
            )
        )
    except ValueError as exc:  # the SDK's only error here: a bad or taken address
        raise Conflict(
            f"cannot serve metrics on {OPS_VARS['metrics_address']}={ops.metrics_address}: {str(exc).splitlines()[0]}"
        ) from None


class OpsServer:
    """State for the probes, fed by the worker (`watch`, `stopping`), and the listener."""

    def __init__(self, ops: OpsParams) -> None:
        self.ops = ops
        self.runtime = make_runtime(ops)
        self._client: Client | None = None
        self._workers: tuple = ()
        self._stopping = False
        self._server: asyncio.base_events.Server | None = None
        self._temporal_ok = (0.0, False)  # (monotonic time checked, answer)

    def watch(self, client, *workers) -> None:
        """The worker is built and its embedding model loaded: readiness follows the
        client's connection and the workers' polling from now on."""
        self._client, self._workers = client, workers

    def stopping(self) -> None:
        self._stopping = True

    async def readiness(self) -> Readiness:
        polling = bool(self._workers) and all(w.is_running for w in self._workers)
        temporal = await self._temporal_healthy() if self._client is not None else False
        return Readiness(
            ready=temporal and polling and not self._stopping,
            temporal=temporal,
            polling=polling,
            model_loaded=self._client is not None,
            shutting_down=self._stopping,
        )

    async def _temporal_healthy(self) -> bool:
        assert self._client is not None  # asked only once watch() gave it
        checked, ok = self._temporal_ok
        if time.monotonic() - checked < TEMPORAL_CHECK_TTL:
            return ok
        try:
            ok = bool(await self._client.service_client.check_health(timeout=TEMPORAL_CHECK_TIMEOUT))
        except Exception:  # unreachable, unauthenticated, timed out: all "not ready"
            ok = False
        self._temporal_ok = (time.monotonic(), ok)
        return ok

    async def start(self) -> None:
        if not self.ops.address:
            return
        host, _, port = self.ops.address.rpartition(":")
        try:
            self._server = await asyncio.start_server(self._handle, host.strip("[]"), int(port), limit=REQUEST_LIMIT)
        except OSError as exc:
            raise Conflict(
                f"cannot serve health checks on {OPS_VARS['address']}={self.ops.address}: {exc.strerror or exc}"
            ) from None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # The whole head, so nothing unread is left to turn the close into a reset.
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
            method, path = (head.split(b"\r\n", 1)[0].decode("latin-1").split() + ["", ""])[:2]
            path = path.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body = 405, "method not allowed\n"
            elif path == HEALTH_PATH:
                status, body = 200, "ok\n"
            elif path == READY_PATH:
                r = await self.readiness()
                status, body = (200 if r.ready else 503), r.model_dump_json() + "\n"
            else:
                status, body = 404, "not found\n"
            raw = body.encode()
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: "
                f"{'application/json' if path == READY_PATH else 'text/plain'}; charset=utf-8\r\n"
                f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode()
                + (raw if method != "HEAD" else b"")
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError):
            pass  # a slow, oversized or vanished client: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def serving(ops: OpsParams) -> AsyncIterator[OpsServer]:
    """The worker's ops surface for the life of the block (metrics from creation)."""
    server = OpsServer(ops)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def probe(path: str, timeout: float = 3.0) -> int:
    """GET a route on this process's VICAR_OPS_ADDRESS; 0 for a 200, else 1."""
    address = Settings.from_env().ops.address
    if not address:
        raise InvalidInput(f"{OPS_VARS['address']} is not set: the worker serves no health checks")
    host, _, port = address.rpartition(":")
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "[::]" else host
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as resp:
            return 0 if resp.status == 200 else 1
    except OSError:  # refused, timed out, or an HTTP error status
        return 1


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "probe" or argv[1] not in (HEALTH_PATH, READY_PATH):
        print(f"usage: python -m vicar.runtime.ops probe {HEALTH_PATH}|{READY_PATH}", file=sys.stderr)
        return InvalidInput.exit_code
    try:
        return probe(argv[1])
    except InvalidInput as exc:
        for line in exc.lines if isinstance(exc, SettingsError) else [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
