"""The web inbox as a person uses it, in a real headless Chromium (Debian's, driven by
Playwright) against the real Temporal test server and a real worker: sign in with the
personal link, open a waiting gate, read its artifact and the proxy's words, approve
it; approve three together; mark an answer the proxy gave alone wrong. Someone the
allow-list does not name, and a form without its CSRF token, are refused.

VICAR_SCREENSHOTS=1 rewrites docs/img/inbox-*.png from the same pages."""

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

from vicar.gates import start_gate
from vicar.models import GateStatus
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_asyncio.fixture(scope="module")
async def world(temporal_env, embedder, tmp_path_factory):
    _browser_or_skip()
    import uvicorn
    from playwright.async_api import async_playwright

    from vicar.config import CalibrationParams, Settings
    from vicar.inbox.accounts import add_user
    from vicar.inbox.app import create_app
    from vicar.memory.principal import MemoryRegistry
    from vicar.worker import build_worker

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("inbox"), calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY)
    )
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    settings = settings.model_copy(update={"task_queue": task_queue})
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, temporal_env.client), host="127.0.0.1", port=port, log_level="warning")
    )
    async with worker, async_playwright() as pw:
        h = VicarHarness(temporal_env.client, task_queue, registry, settings)
        p = h.principal()
        save_allowed(settings.principals_dir, p, ["alice"])
        tokens = {name: add_user(settings.data_dir, name, [])[1] for name in ("alice", "bob")}
        w = World(h, p, f"http://127.0.0.1:{port}", tokens)
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


async def test_sign_in_read_the_gate_and_approve_it(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    row = page.locator("li.gate", has_text="Merge this docs-only change?")
    await row.wait_for()
    assert "docs/install.md" in await row.inner_text()  # the artifact's start, on the list
    await screenshot(page, "inbox-list.png")
    await row.locator("a.q").click()
    await page.wait_for_url(f"{w.base}/gates/{w.waiting}")
    added = page.locator("pre.diff span.add", has_text="DROP TABLE users")
    assert await added.count() == 1  # the diff, coloured as a diff
    assert await page.locator("pre.diff span.del").count() == 1
    proxy = await page.locator("aside.proxy").inner_text()
    assert "Docs-only, fine." in proxy and "approve" in proxy  # the proxy's words, from alice's past answers
    assert "A one-line fix" in await page.locator("section.artifact").inner_text()
    assert "docs-bot" in await page.locator(".meta").first.inner_text()
    await screenshot(page, "inbox-gate.png")
    for width, suffix in ((390, "phone"),):
        await page.set_viewport_size({"width": width, "height": 844})
        await screenshot(page, f"inbox-gate-{suffix}.png")
        await page.goto(f"{w.base}/")
        await screenshot(page, f"inbox-list-{suffix}.png")
        # Usable at a phone's width: nothing wider than the screen.
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await page.goto(f"{w.base}/gates/{w.waiting}")
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
    await page.locator("section.answer button.approve").click()
    await page.wait_for_url(f"{w.base}/answer")
    assert "approve" in await page.locator("ul.results").inner_text()
    result = await w.h.client.get_workflow_handle(w.waiting).result()
    assert (result["action"], result["answered_by"], result["responder"]) == ("approve", "human", "alice")
    assert result["responder_identity"] == "alice"  # the inbox answers with the account's Temporal identity
    await ctx.close()


async def test_approve_three_together_after_a_confirmation(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    for wid in w.batch:
        await page.locator(f'input.pick[value="{wid}"]').check()
    await page.get_by_role("button", name="Approve selected…").click()
    await page.wait_for_url(f"{w.base}/batch")
    listed = page.locator("ol.confirm li")
    assert await listed.count() == 3
    for wid in w.batch:
        assert await page.locator(f'ol.confirm input[value="{wid}"]').count() == 1
    await page.get_by_role("button", name="Approve all 3").click()
    await page.wait_for_url(f"{w.base}/batch/approve")
    assert "Answered 3 of 3" in await page.locator("h1").inner_text()
    for wid in w.batch:
        result = await w.h.client.get_workflow_handle(wid).result()
        assert (result["action"], result["responder"]) == ("approve", "alice")
    await ctx.close()


async def test_mark_an_answer_the_proxy_gave_alone_wrong(world):
    from vicar.audit_client import audit_pages

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.get_by_role("link", name="Answered alone").click()
    item = page.locator("li.gate", has=page.locator(f'input[value="{w.alone}"]'))
    await item.get_by_role("button", name="Wrong").click()
    await page.wait_for_url(f"{w.base}/feed")
    assert "marked wrong by alice" in await page.locator("li.gate").first.inner_text()
    await screenshot(page, "inbox-feed.png")
    records = [r async for pg in audit_pages(w.h.client, w.p, task_queue=w.h.task_queue) for r in pg.records]
    (reviewed,) = [r for r in records if r.workflow_id == w.alone]
    assert reviewed.review is not None and (reviewed.review.verdict, reviewed.review.reviewer) == ("wrong", "alice")
    assert reviewed.review.identity == "alice"
    await page.get_by_role("link", name="Health").click()
    assert await page.locator("svg.chart").count() >= 1  # autonomy and its bound per context
    await screenshot(page, "inbox-health.png")
    await ctx.close()


async def test_someone_the_allow_list_does_not_name_is_refused(world):
    w = world
    gate = await start_gate(
        w.h.client, w.h.request(w.p, escalation_mode="always", artifact="Rename a column."), w.h.task_queue
    )
    await wait_escalated(w.h.client, gate.id)
    ctx, page = await signed_in(w, "bob")
    assert await page.locator(f'input.pick[value="{gate.id}"]').count() == 0  # not in his list
    response = await page.goto(f"{w.base}/gates/{gate.id}")
    assert response.status == 403
    assert "'bob' may not answer" in await page.locator("p.error").inner_text()
    # Even with his own valid CSRF token, a forged answer is refused.
    await page.goto(f"{w.base}/signin")
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    sent = await ctx.request.post(
        f"{w.base}/answer", form={"csrf": csrf, "workflow_id": gate.id, "action": "approve"}, max_redirects=0
    )
    assert sent.status == 403 and "may not answer" in await sent.text()
    assert (await wait_escalated(w.h.client, gate.id)).status is GateStatus.escalated
    await ctx.close()


async def test_a_form_without_its_csrf_token_is_refused(world):
    w = world
    gate = await start_gate(
        w.h.client, w.h.request(w.p, escalation_mode="always", artifact="Add an index."), w.h.task_queue
    )
    await wait_escalated(w.h.client, gate.id)
    ctx, page = await signed_in(w, "alice")
    for form in ({"workflow_id": gate.id, "action": "approve"}, {"csrf": "x" * 43, "workflow_id": gate.id}):
        sent = await ctx.request.post(f"{w.base}/answer", form=form, max_redirects=0)
        assert sent.status == 403 and "CSRF" in await sent.text()
    assert (await wait_escalated(w.h.client, gate.id)).status is GateStatus.escalated
    # A page's own form, with its token, goes through.
    await page.goto(f"{w.base}/gates/{gate.id}")
    await page.locator("section.answer button.approve").click()
    await page.wait_for_url(f"{w.base}/answer")
    assert (await w.h.client.get_workflow_handle(gate.id).result())["responder"] == "alice"
    await ctx.close()


async def test_the_lists_own_reading_of_visibility_is_list_escalations(world):
    from vicar.gates import list_escalations
    from vicar.inbox.listing import waiting_gates

    w = world
    ours = sorted((d for d in await waiting_gates(w.h.client) if d.principal == w.p), key=lambda d: d.workflow_id)
    theirs = sorted(await list_escalations(w.h.client, w.p), key=lambda d: d.workflow_id)
    assert ours and ours == theirs


async def test_a_gate_that_is_not_one_is_a_page_saying_so(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    for path, status, said in (
        ("/gates/vicar-gate/no-such-gate", 404, "no gate"),
        ("/gates/..%2Fetc%2Fpasswd", 400, "not a gate's workflow id"),
        ("/gates/a%20b%3Cscript%3E", 400, "not a gate's workflow id"),
    ):
        response = await page.goto(f"{w.base}{path}")
        assert response.status == status and said in await page.locator("p.error").inner_text()
    await ctx.close()


async def test_ask_the_agents_then_reject_with_words(world):
    w = world
    gate = await start_gate(
        w.h.client, w.h.request(w.p, escalation_mode="always", artifact="Drop the legacy table."), w.h.task_queue
    )
    await wait_escalated(w.h.client, gate.id)
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/gates/{gate.id}")
    await page.locator("#ask").fill("Is there a backup?")
    await page.get_by_role("button", name="Ask").click()
    await page.wait_for_url(f"{w.base}/gates/{gate.id}")
    assert "Is there a backup?" in await page.locator("ul.dialog").inner_text()
    d = await wait_escalated(w.h.client, gate.id)  # asked, and waiting again
    assert any(t.text == "Is there a backup?" and t.responder == "alice" for t in d.dialog)
    await page.reload()
    await page.locator("#words").fill("Not without a backup.")
    await page.get_by_role("button", name="Reject").click()
    await page.wait_for_url(f"{w.base}/answer")
    result = await w.h.client.get_workflow_handle(gate.id).result()
    assert (result["action"], result["text"], result["responder"]) == ("reject", "Not without a backup.", "alice")
    await ctx.close()


async def test_pause_and_resume_the_proxy_from_the_rules_page(world):
    from vicar.client import get_control

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.get_by_role("link", name="Rules").click()
    section = page.locator("section.control", has_text=w.p)
    await section.get_by_role("button", name="Pause the proxy").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert "PAUSED" in await section.inner_text()
    control = await get_control(w.h.client, w.p)
    assert control.pauses and control.pauses[0].by == "alice"
    await section.get_by_role("button", name="Resume the proxy").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert "PAUSED" not in await section.inner_text()
    assert not (await get_control(w.h.client, w.p)).pauses
    await ctx.close()
