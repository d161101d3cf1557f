"""The web inbox's test world, shared by the modules that drive it in a browser: a real
worker on the Temporal test server, the inbox served by uvicorn in-process, Debian's
Chromium driven by Playwright, and alice (on the principal's allow-list) and bob (not).
A module that imports `world` gets its own (module-scoped): keep them few."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from vicar.client.gates import start_gate
from vicar.responders import save_allowed

from .conftest import LOOSE_AUTONOMY, VicarHarness, wait_escalated
from .test_gate import run_answering

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"
DIFF = """diff --git a/docs/install.md b/docs/install.md
--- a/docs/install.md
+++ b/docs/install.md
@@ -1,4 +1,4 @@
 # Install
-Run pip install vicar.
+Run pip install vicar; also DROP TABLE users;
 Then start a worker.
"""


def _browser_or_skip() -> None:
    if shutil.which(CHROMIUM) or os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI needs Debian's Chromium at {CHROMIUM} (.ci/run installs it when root)")
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium")


@dataclass
class World:
    h: VicarHarness
    p: str
    base: str
    tokens: dict[str, str]
    waiting: str = ""  # the gate opened and approved in the browser
    batch: list[str] = field(default_factory=list)
    alone: str = ""  # a gate the proxy answered alone
    browser: Any = None  # playwright's Browser, launched by the fixture
    inbox: Any = None  # the app's state (vicar.inbox.web.Inbox): a test may shorten its undo window


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_asyncio.fixture(scope="module")
async def world(temporal_env, embedder, tmp_path_factory):
    _browser_or_skip()
    import uvicorn
    from playwright.async_api import async_playwright

    from vicar.inbox.accounts import add_user
    from vicar.inbox.app import create_app
    from vicar.memory.registry import MemoryRegistry
    from vicar.settings import CalibrationParams, Settings
    from vicar.worker import build_worker

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("inbox"), calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY)
    )
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    settings = settings.model_copy(update={"task_queue": task_queue})
    port = free_port()
    app = create_app(settings, temporal_env.client, undo_seconds=1.0)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with worker, async_playwright() as pw:
        h = VicarHarness(temporal_env.client, task_queue, registry, settings)
        p = h.principal()
        save_allowed(settings.principals_dir, p, ["alice"])
        tokens = {name: add_user(settings.data_dir, name, [])[1] for name in ("alice", "bob")}
        w = World(h, p, f"http://127.0.0.1:{port}", tokens, inbox=app.state.inbox)
        # Alice's past answers on docs changes: what the proxy's words come from; then one
        # the proxy answers alone (mode never), for the after-the-fact review.
        for i in range(3):
            req = h.request(p, task_type="docs", escalation_mode="always", artifact=f"Fix typo {i} in the guide.")
            await run_answering(h, req, text="Docs-only, fine.")
        req = h.request(p, task_type="docs", escalation_mode="never", artifact="Fix typo 9 in the guide.")
        assert (await run_answering(h, req)).answered_by.value == "proxy"
        w.alone = f"vicar-gate/{req.gate_id}"
        req = h.request(
            p,
            task_type="docs",
            escalation_mode="always",
            question="Merge this docs-only change?",
            artifact=DIFF,
            actor_message="A one-line fix to the install guide.",
            upstream_agent="docs-bot",
        )
        await start_gate(h.client, req, task_queue)
        w.waiting = f"vicar-gate/{req.gate_id}"
        for i in range(3):
            r = h.request(p, task_type="db-migration", escalation_mode="always", artifact=f"ALTER TABLE t{i} ADD c;")
            await start_gate(h.client, r, task_queue)
            w.batch.append(f"vicar-gate/{r.gate_id}")
        for wid in [w.waiting, *w.batch]:
            await wait_escalated(h.client, wid)
        serving = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        w.browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield w
        finally:
            await w.browser.close()
            server.should_exit = True
            await serving
    registry.close()


async def signed_in(w: World, name: str, width: int = 1280):
    ctx = await w.browser.new_context(viewport={"width": width, "height": 900})
    page = await ctx.new_page()
    await page.goto(f"{w.base}/signin#token={w.tokens[name]}")
    await page.wait_for_url(f"{w.base}/")
    return ctx, page


async def screenshot(page, name: str) -> None:
    if os.environ.get("VICAR_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(exist_ok=True)
        await page.screenshot(path=str(DOCS_IMG / name), full_page=True)
