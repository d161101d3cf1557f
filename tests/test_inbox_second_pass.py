"""The reviewer's second pass over the web inbox (issue 37), in a real headless Chromium
(Debian's, driven by Playwright) against the real Temporal test server and a real worker:
every card says why the gate came to the person and whether its artifact could be shown;
no one-tap or batch approve of a gate a rule asked about, whose artifact was refused or
whose proxy could not run (the server refuses it too); on a phone the answer stays in
reach and leads to the next gate; an answer can be undone for a few seconds; a Wrong in
the feed asks first and takes a note; keyboard, search, unread count and favicon.

VICAR_SCREENSHOTS=1 rewrites docs/img/inbox-second-*.png from the same pages."""

from __future__ import annotations

import os
import time

from vicar.client import change_control
from vicar.client.gates import start_gate
from vicar.models import GateStatus
from vicar.proxy.reasons import ANSWERS_DIFFER, NEW_KIND, NO_GUESS

from .conftest import wait_escalated
from .inbox_world import DIFF, DOCS_IMG, screenshot, signed_in, world  # noqa: F401 (world: the module's fixture)

# Where the proxy has nothing to be sure of, the card says so instead of a percentage.
NOT_SURE = (NO_GUESS, NEW_KIND, ANSWERS_DIFFER)
ASK_RULE = dict(op="add_rule", by="alice", rule=dict(name="ask-drop-table", effect="ask", words=["DROP TABLE"]))


async def _gates(w) -> dict[str, str]:
    """A gate a rule asks about, one whose artifact file is refused, and a plain one."""
    if getattr(w, "kinds", None):
        return w.kinds
    await change_control(w.h.client, w.p, ASK_RULE, task_queue=w.h.task_queue)
    ruled = w.h.request(w.p, task_type="docs", escalation_mode="never", question="Ship the docs fix?", artifact=DIFF)
    refused = w.h.request(
        w.p,
        task_type="config",
        escalation_mode="always",
        question="Apply this config?",
        artifact_paths=["/etc/hostname"],
    )
    plain = w.h.request(
        w.p, task_type="deps", escalation_mode="always", question="Bump the lint dep?", artifact="Bump ruff 0.4 -> 0.5."
    )
    kinds = {}
    for name, req in (("ruled", ruled), ("refused", refused), ("plain", plain)):
        kinds[name] = (await start_gate(w.h.client, req, w.h.task_queue)).id
    for wid in kinds.values():
        await wait_escalated(w.h.client, wid)
    w.kinds = kinds
    return kinds


def _card(page, wid: str):
    return page.locator("li.gate", has=page.locator(f'input[value="{wid}"], a[href="/gates/{wid}"]'))


async def test_each_card_says_why_and_no_blind_one_tap_approve(world):
    w = world
    kinds = await _gates(w)
    ctx, page = await signed_in(w, "alice")
    ruled, refused, plain = _card(page, kinds["ruled"]), _card(page, kinds["refused"]), _card(page, kinds["plain"])
    # The rule that asked, by name, flagged, its words marked in the excerpt; no one-tap approve.
    why = await ruled.locator(".why").inner_text()
    assert "ask-drop-table" in why, why
    assert await ruled.locator(".risk").count() == 1
    assert (await ruled.locator("pre.excerpt mark").all_inner_texts()) == ["DROP TABLE"]
    assert await ruled.locator("button.approve").count() == 0
    assert await ruled.locator("a.open", has_text="Open to answer").count() == 1
    # The refused file: said, and no one-tap approve either.
    said = await refused.locator(".shown").inner_text()
    assert "could not be shown" in said, said
    assert await refused.locator("button.approve").count() == 0
    assert (await refused.locator(".why").inner_text()).strip()
    # A plain gate: its reason, its artifact shown, the proxy's confidence in words; one tap.
    assert (await plain.locator(".why").inner_text()).strip()
    assert "shown" in await plain.locator(".shown").inner_text()
    sure = await plain.locator(".sure").inner_text()
    assert "% sure" in sure or sure in NOT_SURE, sure  # vicar.proxy.reasons.confidence_words
    assert await plain.locator("button.approve").count() == 1
    await screenshot(page, "inbox-second-list.png")
    await ctx.close()


async def test_the_server_refuses_a_blind_approve_whatever_the_form(world):
    w = world
    kinds = await _gates(w)
    ctx, page = await signed_in(w, "alice")
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    for name in ("ruled", "refused"):
        sent = await ctx.request.post(
            f"{w.base}/answer", form={"csrf": csrf, "workflow_id": kinds[name], "action": "approve", "back": "/"}
        )
        await page.set_content(await sent.text())
        line = await page.locator("p.flash.error").inner_text()
        assert "open it" in line, line
    ids = "&".join(f"workflow_id={kinds[n]}" for n in ("ruled", "refused"))
    sent = await ctx.request.post(
        f"{w.base}/batch/approve",
        data=f"csrf={csrf}&{ids}",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert "open it" in await sent.text()
    time.sleep(0.5)
    for name in ("ruled", "refused"):
        assert (await wait_escalated(w.h.client, kinds[name])).status is GateStatus.escalated
    await ctx.close()


async def test_the_batch_confirmation_shows_what_is_approved(world):
    w = world
    kinds = await _gates(w)
    ctx, page = await signed_in(w, "alice")
    for name in ("ruled", "plain"):
        await page.locator(f'input.pick[value="{kinds[name]}"]').check()
    await page.get_by_role("button", name="Approve selected (2)").click()
    await page.wait_for_url(f"{w.base}/batch")
    listed = page.locator("ol.confirm li")
    assert await listed.count() == 1  # the plain one; the ruled one is set apart
    item = await listed.first.inner_text()
    assert "Bump ruff 0.4" in item and ("% sure" in item or any(w in item for w in NOT_SURE))  # excerpt, proposal
    assert (await listed.first.locator(".why").inner_text()).strip()
    apart = await page.locator("ul.apart").inner_text()
    assert "ask-drop-table" in apart and await page.locator("ul.apart a", has_text="Open").count() == 1
    assert await page.locator(f'form input[name="workflow_id"][value="{kinds["ruled"]}"]').count() == 0
    await screenshot(page, "inbox-second-confirm.png")
    await ctx.close()


LONG_DIFF = (
    "diff --git a/src/big.py b/src/big.py\n--- a/src/big.py\n+++ b/src/big.py\n@@ -1,900 +1,900 @@\n"
    + "".join(f"-old line {i} of a long change, kept long enough to fill the view's bound\n" for i in range(450))
    + "".join(f"+new line {i} of a long change, kept long enough to fill the view's bound\n" for i in range(450))
)


async def _waiting(w, **kw) -> str:
    gate = await start_gate(w.h.client, w.h.request(w.p, escalation_mode="always", **kw), w.h.task_queue)
    await wait_escalated(w.h.client, gate.id)
    return gate.id


async def test_on_a_phone_the_answer_is_in_reach_and_leads_to_the_next_gate(world):
    w = world
    long_gate = await _waiting(w, task_type="phone", question="Merge the long refactor?", artifact=LONG_DIFF)
    other = await _waiting(w, task_type="phone", question="Merge the small fix?", artifact="Fix a typo.")
    ctx, page = await signed_in(w, "alice", width=390)
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.goto(f"{w.base}/gates/{long_gate}")
    # The answer in reach without scrolling: a bar at the bottom of the screen; a cut
    # artifact's says "Show the whole artifact" before it offers Approve (issue 46).
    whole = page.locator(".answerbar a", has_text="Show the whole artifact")
    box = await whole.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 844, box
    # The whole diff in the page (no box of its own to scroll), and what the cut hides said.
    diff = page.locator("section.artifact pre.diff")
    inner = await diff.evaluate("e => [e.scrollHeight, e.clientHeight, getComputedStyle(e).maxHeight]")
    assert inner[0] <= inner[1] + 1 and inner[2] == "none", inner
    hidden = await page.locator("section.artifact p.hidden").inner_text()
    assert "more lines" in hidden, hidden
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    if os.environ.get("VICAR_SCREENSHOTS") == "1":  # what the phone shows first: the bar in reach
        await page.screenshot(path=str(DOCS_IMG / "inbox-second-gate-phone.png"))
    # Answered from the bar once the whole of it was shown: the next waiting gate opens,
    # with the answer held to undo.
    await whole.click()
    await page.wait_for_url(lambda url: "whole=1" in url)
    bar = page.locator(".answerbar button.approve")
    await bar.click()
    await page.wait_for_url(lambda url: "/gates/" in url and long_gate not in url)
    assert "approve Merge the long refactor?" in await page.locator("form.held").inner_text()
    assert await page.locator(".answerbar button.approve").count() == 1  # the next gate, answerable
    result = await w.h.client.get_workflow_handle(long_gate).result()
    assert (result["action"], result["responder"]) == ("approve", "alice")
    await page.goto(f"{w.base}/gates/{other}")
    # Alice's words on docs gates, shown on a "phone" gate: said so beside them (issue 37 item 6).
    evidence = await page.locator("ul.evidence").first.inner_text()
    assert "Docs-only, fine." in evidence and "said on a docs gate, not phone" in evidence, evidence
    if os.environ.get("VICAR_SCREENSHOTS") == "1":
        await page.screenshot(path=str(DOCS_IMG / "inbox-second-next-phone.png"))
    await ctx.close()


async def test_undo_inside_the_window_sends_nothing(world):
    w = world
    wid = await _waiting(w, task_type="undo", question="Deploy the canary?", artifact="Canary to 5%.")
    w.inbox.undo_seconds = 60.0
    try:
        ctx, page = await signed_in(w, "alice", width=390)
        await page.goto(f"{w.base}/?task_type=undo")
        await _card(page, wid).get_by_role("button", name="Approve").click()
        await page.wait_for_url(f"{w.base}/?task_type=undo")
        held = page.locator("form.held")
        said = await held.inner_text()
        assert "Deploy the canary?" in said and "nothing is sent before" in said, said
        assert await _card(page, wid).count() == 0
        await screenshot(page, "inbox-second-undo-phone.png")
        await held.get_by_role("button", name="Undo").click()
        await page.wait_for_url(f"{w.base}/gates/{wid}")  # back on the gate, to answer again
        assert "undone" in await page.locator("p.flash").inner_text()
        assert await page.locator("form.held").count() == 0
    finally:
        w.inbox.undo_seconds = 1.0
    time.sleep(2.0)  # past the short window too: nothing was left to send
    assert (await wait_escalated(w.h.client, wid)).status is GateStatus.escalated
    await ctx.close()


async def test_wrong_in_the_feed_asks_first_and_takes_a_note(world):
    from vicar.client.audit import audit_pages

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/feed")
    item = page.locator("li.gate", has=page.locator(f'input[value="{w.alone}"]'))
    await item.locator("summary", has_text="Wrong").click()  # asks first: nothing recorded yet
    await item.get_by_label("Why it was wrong").fill("Typos in the guide need my eyes.")
    await screenshot(page, "inbox-second-wrong.png")
    await item.get_by_role("button", name="Mark wrong").click()
    await page.wait_for_url(f"{w.base}/feed")
    line = await page.locator("p.flash").inner_text()
    assert line.startswith("marked wrong: ") and "overruled" in line, line
    records = [r async for pg in audit_pages(w.h.client, w.p, task_queue=w.h.task_queue) for r in pg.records]
    (reviewed,) = [r for r in records if r.workflow_id == w.alone]
    assert reviewed.review is not None and reviewed.review.verdict == "wrong"
    assert reviewed.review.note == "Typos in the guide need my eyes."
    await ctx.close()


async def test_keys_search_unread_and_a_favicon(world):
    w = world
    found = await _waiting(w, task_type="keys", question="Rotate the signing key?", artifact="Rotate key k-7.")
    ctx, page = await signed_in(w, "alice")
    icon = await ctx.request.get(f"{w.base}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg")
    assert "new" in await page.locator("h1 .unread").inner_text()  # first look: all new
    assert (await page.title()).startswith("(")
    await page.reload()
    assert await page.locator("h1 .unread").count() == 0  # seen now
    assert await page.locator("p.keys").is_visible()  # the keys, said on the page
    # Search: only the matching gate stays.
    await page.locator('input[name="q"]').fill("signing key")
    await page.locator('input[name="q"]').press("Enter")
    await page.wait_for_url(lambda url: "q=signing" in url)
    assert await page.locator("li.gate").count() == 1 and await _card(page, found).count() == 1
    # j selects the first card, o opens it; back, j then a approves it.
    await page.keyboard.press("j")
    assert await page.locator("li.gate.current").count() == 1
    await screenshot(page, "inbox-second-keys.png")
    await page.keyboard.press("o")
    await page.wait_for_url(f"{w.base}/gates/{found}")
    await page.keyboard.press("j")  # on a gate's page: the next waiting gate
    await page.wait_for_url(lambda url: "/gates/" in url and found not in url)
    await page.goto(f"{w.base}/?q=signing+key")
    await page.keyboard.press("j")
    time.sleep(1.1)  # a card answers only once it was on the screen a second (issue 46)
    await page.keyboard.press("a")
    await page.wait_for_url(lambda url: "q=signing" in url and "held" not in url)
    assert "Rotate the signing key?" in await page.locator("form.held").inner_text()
    result = await w.h.client.get_workflow_handle(found).result()
    assert (result["action"], result["responder"]) == ("approve", "alice")
    await ctx.close()


def test_a_diff_read_from_a_file_is_coloured(tmp_path):
    from vicar.inbox.gate_data import page_from_view
    from vicar.inbox.web import Inbox
    from vicar.models.view import ArtifactFile, GateView
    from vicar.settings import Settings

    view = GateView(
        gate_id="g",
        workflow_id="vicar-gate/g",
        workflow_status="running",
        status="escalated",
        principal="p",
        state="WORK_ASSERT",
        task_type="docs",
        question="Merge?",
        artifact_files=[
            ArtifactFile(path="change.diff", excerpt=DIFF),
            ArtifactFile(path="notes.txt", excerpt="+ not a diff"),
        ],
    )
    page = page_from_view(view)
    assert [k for k, _ in page.file_diffs["change.diff"]].count("add") == 1 and "notes.txt" not in page.file_diffs
    assert page.excerpt.startswith("docs/install.md:")
    env = Inbox(settings=Settings(data_dir=tmp_path)).templates
    html = env.get_template("gate.html").render(
        g=page, c=None, csrf="x", me=None, path="/gates/g", seen="s", undo_seconds=10
    )
    assert '<span class="add">+Run pip install vicar; also DROP TABLE users;</span>' in html


async def test_a_held_answer_outlives_the_server_that_held_it(world, tmp_path):
    """`vicar inbox` takes an answer and is killed inside its undo window (10 s); the
    next `vicar inbox` on the same data directory sends it, and says so to the person."""
    import asyncio
    import re
    import signal
    import subprocess
    import sys

    import httpx

    from vicar.inbox.accounts import add_user
    from vicar.inbox.held import held_dir
    from vicar.responders import save_allowed
    from vicar.settings import Settings

    from .inbox_world import free_port

    w = world
    wid = await _waiting(w, task_type="restart", question="Roll out the schema?", artifact="Add column c.")
    data = tmp_path / "vicar"
    token = add_user(data, "alice", [w.p])[1]
    save_allowed(Settings(data_dir=data).principals_dir, w.p, ["alice"])
    env = {
        **os.environ,
        "VICAR_DATA_DIR": str(data),
        "TEMPORAL_ADDRESS": w.h.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": w.h.task_queue,
    }

    async def serve() -> tuple[subprocess.Popen, str]:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "vicar.cli", "inbox", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                async with httpx.AsyncClient() as probe:
                    if (await probe.get(f"{base}/signin")).status_code == 200:
                        return proc, base
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
        proc.kill()
        raise AssertionError("vicar inbox did not serve")

    def field(html: str, name: str) -> str:
        found = re.search(rf'name="{name}" value="([^"]+)"', html)
        assert found is not None, (name, html[:300])
        return found[1]

    first, base = await serve()
    try:
        async with httpx.AsyncClient(base_url=base) as http:
            csrf = field((await http.get("/signin")).text, "csrf")
            assert (await http.post("/signin", data={"csrf": csrf, "token": token})).status_code == 303
            page = (await http.get(f"/gates/{wid}")).text
            form = {"csrf": field(page, "csrf"), "seen": field(page, "seen"), "workflow_id": wid, "action": "approve"}
            form["shown"] = field(page, "shown")
            await asyncio.sleep(1.1)  # read: the page was on the screen a second (issue 46)
            assert (await http.post("/answer", data=form)).status_code == 303
            cookies = dict(http.cookies)
        assert len(list(held_dir(data).glob("*.json"))) == 1  # on disk before the page said "held"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (await wait_escalated(w.h.client, wid)).status is GateStatus.escalated  # not sent by the dead one
    second, base = await serve()
    try:
        result = await asyncio.wait_for(w.h.client.get_workflow_handle(wid).result(), 60)
        assert (result["action"], result["responder"]) == ("approve", "alice")
        async with httpx.AsyncClient(base_url=base, cookies=cookies) as http:
            listed = (await http.get("/")).text
        assert "sent: approve Roll out the schema?" in listed
        assert list(held_dir(data).glob("*.json")) == [] and list(held_dir(data).glob("*.sending")) == []
    finally:
        second.terminate()
        second.wait(30)


def test_a_card_without_a_reason_or_an_artifact_has_no_one_tap_approve():
    from vicar.client.gates import UNREADABLE
    from vicar.inbox.cards import card, marked
    from vicar.models import GateDetails
    from vicar.models.control import Rule

    base = dict(gate_id="g", principal="p", state="WORK_ASSERT", task_type="docs", status="escalated", question="Q?")
    plain = GateDetails(
        **base, artifact_excerpt="x = 1", calibration_guard="cold_start", calibration_note="depth 0 < 3"
    )
    assert card(plain, None).one_tap and card(plain, None).why
    no_reason = GateDetails(**base, artifact_excerpt="x = 1")  # nothing says why it came to the person
    assert "reason" in card(no_reason, None).open_first
    nothing_shown = plain.model_copy(update={"artifact_excerpt": ""})
    assert card(nothing_shown, None).open_first == "no artifact on the card"
    sealed = plain.model_copy(update={"question": f"{UNREADABLE}sealed)"})
    assert "could not be shown" in card(sealed, None).open_first
    rule = Rule(name="r", effect="ask", words=["drop table", "table"], regex="us.rs")
    assert marked("a DROP TABLE users;", rule) == [
        ("a ", False),
        ("DROP TABLE", True),
        (" ", False),
        ("users", True),
        (";", False),
    ]


async def test_on_a_phone_a_gate_without_one_tap_takes_two(world):
    """The ruled gate from the list at 390 px: Open to answer, then Approve in the bar."""
    w = world
    kinds = await _gates(w)
    ctx, page = await signed_in(w, "alice", width=390)
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.reload()
    await _card(page, kinds["ruled"]).get_by_role("link", name="Open to answer").click()  # tap 1
    await page.wait_for_url(f"{w.base}/gates/{kinds['ruled']}")
    assert "ask-drop-table" in await page.locator(".reasons .risk").inner_text()
    await page.locator(".answerbar button.approve").click()  # tap 2
    await page.wait_for_url(lambda url: kinds["ruled"] not in url)
    result = await w.h.client.get_workflow_handle(kinds["ruled"]).result()
    assert (result["action"], result["responder"]) == ("approve", "alice")
    await ctx.close()


async def test_a_held_answer_the_gate_already_has_is_said_sent(world):
    """A send cut short by a crash is sent again by the next inbox: the gate refuses it
    (it has that very answer) and the line says it was sent, not 'not sent'."""
    import json

    from vicar.client.gates import answer_gate
    from vicar.inbox.held import held_dir
    from vicar.models import HumanAnswer

    w = world
    wid = await _waiting(w, task_type="resend", question="Tag the release?", artifact="Tag v1.2.3.")
    w.inbox.undo_seconds = 600.0
    try:
        ctx, page = await signed_in(w, "alice")
        await page.goto(f"{w.base}/?task_type=resend")
        await _card(page, wid).get_by_role("button", name="Approve").click()
        await page.wait_for_url(f"{w.base}/?task_type=resend")
    finally:
        w.inbox.undo_seconds = 1.0
    # The first send got through (as the crashed process's would have) ...
    await answer_gate(w.h.client, wid, HumanAnswer(action="approve", text="", responder="alice"))
    # ... and the window closes: the inbox sends it again.
    (path,) = [p for p in held_dir(w.h.settings.data_dir).glob("*.json") if wid in p.read_text()]
    held = json.loads(path.read_text())
    path.write_text(json.dumps({**held, "due": 0}))
    for _ in range(100):
        await page.reload()
        if await page.locator("p.flash.said").count():
            break
        time.sleep(0.1)
    line = await page.locator("p.flash.said").inner_text()
    assert line.startswith("sent: approve Tag the release?") and "not sent" not in line, line
    await ctx.close()


async def test_the_health_charts_labels_are_legible_on_a_phone(tmp_path):
    """The chart is drawn 600 units wide: at 390 px its 11-unit labels were about 7 px."""
    from datetime import UTC, datetime, timedelta

    from playwright.async_api import async_playwright

    from vicar.inbox.render import Point, chart
    from vicar.inbox.web import HERE

    from .inbox_world import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip

    _browser_or_skip()
    now = datetime.now(UTC)
    svg = chart([Point(now - timedelta(hours=i), 0.3, i % 2 == 0) for i in range(10, 0, -1)], 0.05)
    css = (HERE / "static" / "inbox.css").read_text()
    page_file = tmp_path / "chart.html"
    page_file.write_text(
        "<html><head><meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<style>{css}</style></head><body><main><section class=context>{svg}</section></main></body></html>"
    )
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 390, "height": 844})
            await page.goto(page_file.as_uri())
            sizes = await page.evaluate(
                "Array.from(document.querySelectorAll('svg.chart text')).map(t => t.getBoundingClientRect().height)"
            )
        finally:
            await browser.close()
    assert sizes and min(sizes) >= 12, sizes
