"""Connecting to Temporal: the SDK's environment configuration when the user set one,
else the embedded server of this data directory (and this process then counts among its
users until it exits, so the server stays up for it: vicar/runtime/server.py)."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from vicar.errors import InvalidInput, Unreachable
from vicar.runtime.codec import data_converter
from vicar.runtime.key_check import check_keys
from vicar.runtime.server import DEFAULT_PORT, embedded_address, env_configured, hold_use
from vicar.runtime.tracing import tracing_interceptors
from vicar.settings import Settings
from vicar.workflows.search_attributes import SEARCH_ATTRIBUTES


def connect_config(settings: Settings) -> dict:
    """Client.connect keyword arguments. Secrets (API key, TLS) stay in the returned
    dict and the process environment: they never enter workflow input or history."""
    if env_configured():
        try:
            cfg = dict(ClientConfig.load_client_connect_config())
        except Exception as exc:  # the SDK raises several types for bad config files
            raise InvalidInput(f"invalid Temporal client configuration: {exc}") from None
        cfg.setdefault("target_host", f"localhost:{DEFAULT_PORT}")
        return cfg
    port = settings.server.port or DEFAULT_PORT  # where this data directory's server would be
    return {"target_host": embedded_address(settings.data_dir) or f"127.0.0.1:{port}", "namespace": "default"}


async def connect(
    settings: Settings,
    *,
    target_host: str | None = None,
    namespace: str | None = None,
    timeout: float = 10.0,
    runtime: Runtime | None = None,
    worker: bool = False,
) -> Client:
    """runtime: an SDK runtime with metrics (vicar.runtime.ops.make_runtime); None: the SDK's default.
    worker: the client of a worker, the only kind of process that makes a payload key
    when the data dir has none (vicar/runtime/codec.py); any other is refused in one line."""
    if not target_host and not env_configured():
        # Before the address is read: a server that is stopping is waited for, not joined.
        await asyncio.to_thread(hold_use, settings.data_dir)
    cfg = connect_config(settings)
    if target_host:
        cfg["target_host"] = target_host
    if namespace:
        cfg["namespace"] = namespace
    # Payloads sealed (docs/codec.md); no keys, or a bad key file, fails here in one line,
    # before anything is sent.
    converter = data_converter(settings, make_keys=worker)
    try:
        client = await asyncio.wait_for(
            # Tracing (docs/tracing.md) is off unless OpenTelemetry's variables configure it;
            # the client's interceptors reach the workers built on it.
            Client.connect(**cfg, data_converter=converter, runtime=runtime, interceptors=tracing_interceptors()),
            timeout=timeout,
        )
    except (TimeoutError, RuntimeError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreachable(
            f"cannot reach Temporal at {cfg['target_host']} ({reason[:160]}); "
            "start one with `vicar worker` or set TEMPORAL_ADDRESS"
        ) from None
    if not worker:
        # Keys other than the workers' would have every write refused: say so now.
        await check_keys(client, settings.task_queue)
    return client


async def ensure_search_attributes(client: Client) -> None:
    """Register Vicar's search attributes on a server that lacks them (idempotent)."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    kinds = {
        "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    }
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {name: kinds[kind] for name, kind in SEARCH_ATTRIBUTES.items() if name not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
