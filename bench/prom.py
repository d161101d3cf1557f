"""Counting RESOURCE_EXHAUSTED answers at the Temporal server, from its own Prometheus
metrics (`service_errors_resource_exhausted`, frontend). The clients never see them: the
core client retries such an answer with backoff beneath the Python SDK, and counts it
in none of its own failure metrics (measured: 30 concurrent updates to one workflow,
77 update attempts at the client, 0 client failures, 42 at the server)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

_SERIES = re.compile(r"^service_errors_resource_exhausted\{([^}]*)\}\s+([0-9.eE+-]+)$")


def server_metrics_url(data_dir: Path) -> str:
    """The embedded dev server's /metrics: its start-up banner (in its log) names the
    random port `temporal server start-dev` picks."""
    for log in sorted(data_dir.rglob("server.log")):
        m = re.search(r"Temporal Metrics:\s*(\S+)", log.read_text(errors="replace"))
        if m:
            return m.group(1)
    raise RuntimeError(f"no 'Temporal Metrics:' line in a server.log under {data_dir}")


def resource_exhausted(url: str) -> dict[str, int]:
    """RESOURCE_EXHAUSTED answers of the frontend so far, per operation."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _SERIES.match(line)
        if m and 'service_name="frontend"' in m.group(1):
            op = re.search(r'operation="([^"]*)"', m.group(1))
            key = op.group(1) if op else "?"
            out[key] = out.get(key, 0) + int(float(m.group(2)))
    return out


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
