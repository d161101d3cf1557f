"""The reviewer's third pass over the web inbox's layout (issue 46), in Debian's Chromium
at 390 px and 1280 px against the real Temporal test server and a real worker: no page
wider than the screen, every tap target at least 44 px, "Open to answer" cards as wide
as the others, the list keeping its place after an answer, "Approve selected (n)" in
reach, a rule removed only after asking (and put back by Undo), the whole of a cut
artifact reachable before Approve, no word of Vicar's machinery in what a reviewer
reads, and a Temporal that does not answer for a moment met by a page that retries by
itself (one line in the log).

VICAR_SCREENSHOTS=1 rewrites docs/img/inbox-third-*.png from the same pages."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from vicar.client import change_control

from .inbox_checks import card, jargon_in, overflow, reader_text, shot, small_targets, waiting
from .inbox_world import signed_in, world  # noqa: F401 (world: the module's fixture)
from .test_inbox_second_pass import ASK_RULE, LONG_DIFF

WIDTHS = pytest.mark.parametrize("width", [390, 1280])


async def _kinds(w) -> dict[str, str]:
    """Once per world: a gate a rule asks about, one whose file is refused, a long diff,
    and a dozen plain ones (a list long enough to scroll)."""
    if getattr(w, "third", None):
        return w.third
    await change_control(w.h.client, w.p, ASK_RULE, task_queue=w.h.task_queue)
    kinds = {
        "ruled": await waiting(
            w, task_type="look", escalation_mode="never", question="Ship it?", artifact="DROP TABLE x;"
        ),
        "refused": await waiting(w, task_type="look", question="Apply this config?", artifact_paths=["/etc/hostname"]),
        "long": await waiting(w, task_type="long", question="Merge the long refactor?", artifact=LONG_DIFF),
    }
    for i in range(12):
        kinds[f"plain{i}"] = await waiting(
            w, task_type="look", question=f"Bump dep {i}?", artifact=f"Bump d{i} 1 -> 2."
        )
    w.third = kinds
    return kinds


async def _every_page(w, page, kinds):
    """Visit each page a reviewer meets; yield its name once it is loaded."""
    for name, path in (
        ("list", "/"),
        ("gate", f"/gates/{kinds['long']}"),
        ("ruled gate", f"/gates/{kinds['ruled']}"),
        ("refused gate", f"/gates/{kinds['refused']}"),
        ("feed", "/feed"),
        ("rules", "/rules"),
        ("health", "/health"),
        ("error", "/gates/vicar-gate/not-a-gate-of-anyone"),
    ):
        await page.goto(f"{w.base}{path}")
        yield name
    await page.goto(f"{w.base}/?task_type=look")
    for wid in (kinds["plain0"], kinds["plain1"]):
        await page.locator(f'input.pick[value="{wid}"]').check()
    await page.get_by_role("button", name="Approve selected (2)").click()
    await page.wait_for_url(f"{w.base}/batch")
    yield "confirm"


@WIDTHS
async def test_no_page_is_wider_than_the_screen_and_every_target_takes_a_finger(world, width):
    w = world
    kinds = await _kinds(w)
    ctx, page = await signed_in(w, "alice", width)
    problems = {}
    async for name in _every_page(w, page, kinds):
        wide, small = await overflow(page), await small_targets(page)
        if wide > 0 or small:
            problems[name] = (f"{wide} px too wide", small)
    stranger = await w.browser.new_context(viewport={"width": width, "height": 900})
    signin = await stranger.new_page()
    await signin.goto(f"{w.base}/signin")  # and the page before any of them
    wide, small = await overflow(signin), await small_targets(signin)
    if wide > 0 or small:
        problems["signin"] = (f"{wide} px too wide", small)
    assert problems == {}
    await stranger.close()
    await ctx.close()


@WIDTHS
async def test_no_word_of_the_machinery_reaches_the_reviewer(world, width):
    w = world
    kinds = await _kinds(w)
    ctx, page = await signed_in(w, "alice", width)
    said = {}
    async for name in _every_page(w, page, kinds):
        found = jargon_in(await reader_text(page))
        if found:
            said[name] = found
    assert said == {}, "\n".join(f"{k}: {v}" for k, v in said.items())
    # Behind "the numbers" the details are still there, for whoever opens them.
    await page.goto(f"{w.base}/?task_type=look")
    numbers = card(page, kinds["refused"]).locator("details.numbers")
    await numbers.locator("summary").click()
    assert "guard" in await numbers.inner_text()
    await ctx.close()


@WIDTHS
async def test_an_open_to_answer_card_is_as_wide_as_the_others(world, width):
    w = world
    kinds = await _kinds(w)
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/?task_type=look")
    ruled = card(page, kinds["ruled"])
    link = await ruled.locator("a.open").bounding_box()
    box = await ruled.bounding_box()
    assert link is not None and box is not None
    if width == 390:  # a phone: the link takes the card's whole width, as Approve does
        assert link["width"] >= 0.8 * box["width"], (link, box)
        plain = await card(page, kinds["plain0"]).locator("button.approve").bounding_box()
        # (the ruled card's border is 3 px wider on the left: it is flagged)
        assert plain is not None and abs(plain["width"] - link["width"]) < 5, (plain, link)
    await shot(page, f"inbox-third-list-{width}.png")
    await ctx.close()


@WIDTHS
async def test_the_list_keeps_its_place_and_the_batch_bar_stays_in_reach(world, width):
    w = world
    kinds = await _kinds(w)
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/?task_type=look")
    # Approve selected (n), counted as boxes are ticked, and in reach once scrolled down.
    bar = page.get_by_role("button", name="Approve selected (0)")
    assert await bar.is_disabled()
    await page.locator(f'input.pick[value="{kinds["plain3"]}"]').check()
    await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    bar = page.get_by_role("button", name="Approve selected (1)")
    box = await bar.bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
    # An answer far down the list: the list comes back where it was, not at its top.
    await page.reload()
    cards = page.locator("li.gate")
    last = cards.filter(has=page.locator("button.approve")).last
    above_id = await cards.nth(await cards.count() - 2).locator("input.pick").get_attribute("value")
    assert await cards.last.locator("button.approve").count() == 1 and above_id
    await last.scroll_into_view_if_needed()
    await asyncio.sleep(1.1)
    y_before = await page.evaluate("window.scrollY")
    assert y_before > 300
    async with page.expect_navigation():
        await last.get_by_role("button", name="Approve").click()
    await page.wait_for_function("window.scrollY > 0")
    # The card above the answered one is still on the screen.
    above = await card(page, above_id).bounding_box()
    assert above is not None and 0 <= above["y"] + above["height"] and above["y"] <= 900, above
    # A search with no result, then / goes to the search again.
    await page.goto(f"{w.base}/?q=nothing+like+this+waits")
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.name") == "q"
    await ctx.close()


@WIDTHS
async def test_a_rule_is_removed_after_asking_and_undone(world, width):
    from vicar.client import get_control

    w = world
    name = f"ask-rm-{width}"
    rule = dict(op="add_rule", by="alice", rule=dict(name=name, effect="ask", words=["rm -rf"]))
    await change_control(w.h.client, w.p, rule, task_queue=w.h.task_queue)
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/rules")
    await page.get_by_role("button", name=f"remove rule {name}").click()
    # Asked first: nothing removed yet.
    assert name in {r.name for r in (await get_control(w.h.client, w.p)).rules}
    await page.get_by_role("button", name=f"Remove “{name}”").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert name not in {r.name for r in (await get_control(w.h.client, w.p)).rules}
    await shot(page, f"inbox-third-rule-removed-{width}.png")
    await page.get_by_role("button", name=f"Undo: put “{name}” back").click()
    await page.wait_for_url(f"{w.base}/rules")
    back = {r.name: r for r in (await get_control(w.h.client, w.p)).rules}
    assert name in back and back[name].words == ["rm -rf"]
    await ctx.close()


@WIDTHS
async def test_the_whole_of_a_cut_artifact_is_reachable_before_approve(world, width):
    w = world
    kinds = await _kinds(w)
    wid = (
        kinds["long"] if width == 390 else await waiting(w, task_type="long", question="Merge it?", artifact=LONG_DIFF)
    )
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/gates/{wid}")
    # The answer's bar in reach at either width; no Approve until the rest was opened.
    bar = page.locator(".answerbar")
    box = await bar.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900, box
    assert await page.locator("button.approve").count() == 0
    seen = await page.locator("form input[name=seen]").first.get_attribute("value")
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    shown = await page.locator("form input[name=shown]").first.get_attribute("value")
    await asyncio.sleep(1.1)
    forged = await ctx.request.post(
        f"{w.base}/answer", form={"csrf": csrf, "seen": seen, "shown": shown, "workflow_id": wid, "action": "approve"}
    )
    assert "the whole artifact" in await forged.text()
    await shot(page, f"inbox-third-cut-{width}.png", whole_page=False)
    await bar.get_by_role("link", name="Show the whole artifact").click()
    await page.wait_for_url(lambda url: "whole=1" in url)
    assert "+new line 449 of a long change" in await page.locator("section.artifact").inner_text()
    await page.locator(".answerbar button.approve").click()
    await page.wait_for_url(lambda url: wid not in url)
    result = await w.h.client.get_workflow_handle(wid).result()
    assert (result["action"], result["responder"]) == ("approve", "alice")
    await ctx.close()


class Blinking:
    """A TCP relay between the inbox and Temporal that can drop every connection and
    refuse new ones for a moment: a real transport error, as a loaded server's blip."""

    def __init__(self, target: str):
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.down = False
        self.pipes: set[asyncio.Task] = set()
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader, writer):
        if self.down:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self.writers |= {writer, up_writer}

        async def pipe(src, dst):
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        for a, b in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(pipe(a, b))
            self.pipes.add(task)
            task.add_done_callback(self.pipes.discard)

    def blink(self) -> None:
        self.down = True
        for wr in self.writers:
            wr.close()
        self.writers.clear()

    async def close(self) -> None:
        self.blink()
        self.server.close()
        for task in list(self.pipes):
            task.cancel()


@WIDTHS
async def test_a_temporal_that_does_not_answer_is_a_page_that_retries_by_itself(world, width):
    import uvicorn
    from temporalio.client import Client

    from vicar.inbox.app import create_app

    from .inbox_world import free_port

    w = world
    relay = Blinking(w.h.client.service_client.config.target_host)
    client = await Client.connect(
        await relay.start(), namespace=w.h.client.namespace, data_converter=w.h.client.data_converter
    )
    lines: list[logging.LogRecord] = []
    catch = logging.Handler()
    catch.emit = lines.append
    logger = logging.getLogger("uvicorn.error")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(w.h.settings, client), host="127.0.0.1", port=port))
    serving = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        logger.addHandler(catch)  # after uvicorn configured its loggers (that drops their handlers)
        base = f"http://127.0.0.1:{port}"
        ctx = await w.browser.new_context(viewport={"width": width, "height": 900})
        page = await ctx.new_page()
        await page.goto(f"{base}/signin#token={w.tokens['alice']}")
        await page.wait_for_url(f"{base}/")
        relay.blink()
        lines.clear()
        got = await page.goto(f"{base}/")
        assert got.status == 503
        said = await page.locator("main").inner_text()
        assert "Temporal did not answer" in said and "tries again by itself" in said, said
        await shot(page, f"inbox-third-retry-{width}.png")
        relay.down = False
        # No tap: the page itself asks again, and the list comes.
        await page.locator("h1", has_text="Waiting for you").wait_for(timeout=20_000)
        failed = [r for r in lines if "Temporal did not answer" in r.getMessage()]
        assert len(failed) >= 1 and all(r.exc_info is None and "\n" not in r.getMessage() for r in lines), [
            r.getMessage() for r in lines
        ]
        await ctx.close()
    finally:
        logger.removeHandler(catch)
        server.should_exit = True
        await serving
        await relay.close()
