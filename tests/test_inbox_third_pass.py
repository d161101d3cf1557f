"""The reviewer's third pass over the web inbox (issue 46), in Debian's Chromium at a
phone's width (390 px) and a desk's (1280 px), against the real Temporal test server and
a real worker: no answer by accident (a card must have been on screen for a second, and
the server checks it), Undo takes back the newest answer and keeps its words, a large
batch asks for its count, no one-tap answer that needs words, the proxy's words never
turned against its own answer, and a refusal that tells an intruder nothing.

VICAR_SCREENSHOTS=1 rewrites docs/img/inbox-third-*.png from the same pages."""

from __future__ import annotations

import asyncio
import re

import pytest

from vicar.models import GateStatus

from .conftest import wait_escalated
from .inbox_checks import card, held_gates, shot, waiting
from .inbox_world import signed_in, world  # noqa: F401 (world: the module's fixture)
from .test_gate import run_answering

WIDTHS = pytest.mark.parametrize("width", [390, 1280])


def _field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found is not None, (name, html[:300])
    return found[1]


class LongWindow:
    """Answers held a minute: nothing is sent while the test looks."""

    def __init__(self, w):
        self.w = w

    def __enter__(self):
        self.w.inbox.undo_seconds = 60.0

    def __exit__(self, *exc):
        self.w.inbox.undo_seconds = 1.0


@WIDTHS
async def test_a_second_tap_never_answers_the_next_gate(world, width):
    """The bar's Approve tapped twice 0.55 s apart: the first gate is answered, the gate
    that opens next is not (its page was on screen for less than a second)."""
    w = world
    first = await waiting(w, task_type=f"twice-{width}", question="Merge the docs fix?", artifact="Fix a typo.")
    await waiting(w, task_type=f"twice-{width}", question="Roll back the 14:00 deploy now?", artifact="Roll back.")
    before = held_gates(w)
    with LongWindow(w):
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/gates/{first}")
        bar = page.locator(".answerbar button.approve")
        box = await bar.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900, box  # in reach at either width
        await asyncio.sleep(1.2)  # read it
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        await page.mouse.click(x, y)
        await asyncio.sleep(0.55)
        await page.mouse.click(x, y)  # the thumb again, on whatever is there now
        await asyncio.sleep(1.5)
        assert held_gates(w) - before == {first}
        await ctx.close()


@WIDTHS
async def test_a_second_a_never_approves_the_next_card_and_the_selection_stays(world, width):
    w = world
    kind = f"keys-{width}"
    gates = [await waiting(w, task_type=kind, question=f"Bump dep {i}?", artifact=f"Bump dep {i}.") for i in range(3)]
    before = held_gates(w)
    with LongWindow(w):
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/?task_type={kind}")
        await asyncio.sleep(1.2)
        await page.keyboard.press("j")
        async with page.expect_navigation():
            await page.keyboard.press("a")
        await page.keyboard.press("a")  # a second a, at once: the next card was not on screen a second
        await asyncio.sleep(1.0)
        assert held_gates(w) - before == {gates[0]}
        # The selection stayed where it was: on the card that took the answered one's place.
        current = page.locator("li.gate.current")
        assert await current.count() == 1 and await current.locator(f'input.pick[value="{gates[1]}"]').count() == 1
        async with page.expect_navigation():
            await page.keyboard.press("a")  # now it was on screen long enough
        assert held_gates(w) - before == {gates[0], gates[1]}
        await ctx.close()


@WIDTHS
async def test_the_server_takes_no_answer_from_a_card_shown_under_a_second(world, width):
    """Whatever the page's script does: a POST with a token minted under a second ago, a
    forged token or none is refused; the same token a second later is taken."""
    w = world
    wid = await waiting(w, task_type=f"fast-{width}", question="Tag v2?", artifact="Tag v2.")
    with LongWindow(w):
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/?task_type=fast-{width}")
        html = await page.content()
        shown = _field(html, "shown")
        form = {"csrf": _field(html, "csrf"), "workflow_id": wid, "action": "approve", "back": "/"}
        stamp, mac = shown.split(".")
        for token in (shown, None, f"{int(stamp) - 5000}.{mac}", f"{stamp}.{'0' * len(mac)}"):
            sent = await ctx.request.post(f"{w.base}/answer", form={**form, **({"shown": token} if token else {})})
            await page.set_content(await sent.text())
            said = await page.locator("p.flash.error").inner_text()
            assert said.startswith("not answered: ") and wid not in held_gates(w), (token, said)
        await asyncio.sleep(1.1)
        sent = await ctx.request.post(f"{w.base}/answer", form={**form, "shown": shown})
        assert sent.ok and wid in held_gates(w)
        await ctx.close()


@WIDTHS
async def test_undo_takes_back_the_newest_answer_and_keeps_its_words(world, width):
    w = world
    kind = f"undo-{width}"
    rejected = await waiting(w, task_type=kind, question="Drop the audit table?", artifact="DROP TABLE audit;")
    approved = await waiting(w, task_type=kind, question="Bump the linter?", artifact="Bump ruff.")
    words = "Not before the backup is verified."
    with LongWindow(w):
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/gates/{rejected}")
        await page.locator("#words").fill(words)
        await page.get_by_role("button", name="Reject").click()
        await page.wait_for_url(lambda url: rejected not in url)
        await page.goto(f"{w.base}/?task_type={kind}")
        async with page.expect_navigation():
            await card(page, approved).get_by_role("button", name="Approve").click()
        banners = page.locator("form.held")
        assert "Bump the linter?" in await banners.first.inner_text()  # the newest on top
        assert await banners.filter(has_text="Drop the audit table?").count() == 1
        assert await page.locator("details.heldmore form.held").count() == await banners.count() - 1  # folded
        await shot(page, f"inbox-third-undo-{width}.png")
        await banners.first.get_by_role("button", name="Undo").click()
        await page.wait_for_url(f"{w.base}/gates/{approved}")
        assert held_gates(w) & {rejected, approved} == {rejected}
        await page.locator("details.heldmore summary").click()  # the older ones, unfolded
        await page.locator("form.held", has_text="Drop the audit table?").get_by_role("button", name="Undo").click()
        await page.wait_for_url(f"{w.base}/gates/{rejected}")
        assert await page.locator("#words").input_value() == words  # what was typed, kept
        assert held_gates(w) & {rejected, approved} == set()
        await ctx.close()
    for wid in (rejected, approved):
        assert (await wait_escalated(w.h.client, wid)).status is GateStatus.escalated


@WIDTHS
async def test_approve_and_ask_me_first_from_the_gate_page(world, width):
    """The gate's page offers "Approve, and ask me first" beside Approve (a tap target a
    thumb can hit, nothing sideways at a phone's width): the answer is held with it, and
    the gate records it, so this kind of action stays the person's (vicar.proxy.support)."""
    import json

    from vicar.inbox.held import held_dir

    w = world
    wid = await waiting(
        w, task_type=f"askfirst-{width}", question=f"Prune old branches ({width})?", artifact="git branch -d x"
    )
    w.inbox.undo_seconds = 8.0  # long enough to look at the held answer, short enough to see it sent
    try:
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/gates/{wid}")
        button = page.get_by_role("button", name="Approve, and ask me first")
        box = await button.bounding_box()
        assert box is not None and box["height"] >= 44 and box["width"] >= 44, box
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await asyncio.sleep(1.2)  # read it
        await button.scroll_into_view_if_needed()
        await shot(page, f"inbox-ask-first-{width}.png", whole_page=False)
        async with page.expect_navigation():
            await button.click()
        assert wid in held_gates(w)
        (kept,) = [
            json.loads(f.read_text())
            for f in held_dir(w.h.settings.data_dir).glob("*.json")
            if wid in json.loads(f.read_text())["gates"]
        ]
        assert kept["action"] == "approve" and kept["ask_first"] is True
        banner = page.locator("form.held", has_text=f"Prune old branches ({width})?")
        assert "(and ask me first)" in (await banner.text_content() or "")  # older banners are folded
        await ctx.close()
    finally:
        w.inbox.undo_seconds = 1.0
    # Sent once its window has closed.
    record = None
    for _ in range(120):
        raw = w.h.registry.get(w.p).store.outcome_record(wid)
        if raw:
            record = json.loads(raw)
            break
        await asyncio.sleep(0.5)
    assert record is not None, "the held answer was not sent"
    assert (record["action"], record["ask_first"]) == ("approve", True), record


@WIDTHS
async def test_a_large_batch_asks_for_its_count(world, width):
    w = world
    kind = f"batch-{width}"
    gates = [
        await waiting(w, task_type=kind, question=f"Rename file {i}?", artifact=f"git mv a{i} b{i}") for i in range(4)
    ]
    with LongWindow(w):
        ctx, page = await signed_in(w, "alice", width)
        await page.goto(f"{w.base}/?task_type={kind}")
        await page.locator("#all").check()
        await page.get_by_role("button", name="Approve selected (4)").click()
        await page.wait_for_url(f"{w.base}/batch")
        go = page.get_by_role("button", name="Approve all 4")
        assert await go.is_disabled()  # until the count is typed
        html = await page.content()
        ids = "&".join(f"workflow_id={g}" for g in gates)
        base = f"csrf={_field(html, 'csrf')}&shown={_field(html, 'shown')}&{ids}"
        await asyncio.sleep(1.1)  # read: what is refused below is the count alone
        for extra in ("", "&count=3"):  # no count, a wrong one: nothing held
            sent = await ctx.request.post(
                f"{w.base}/batch/approve",
                data=base + extra,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert sent.status == 400 and "type 4" in await sent.text()
        assert held_gates(w) & set(gates) == set()
        await page.get_by_label("Type 4 to approve all 4").fill("4")
        await shot(page, f"inbox-third-batch-{width}.png")
        await go.click()
        await page.wait_for_url(f"{w.base}/batch/approve")
        assert held_gates(w) >= set(gates)
        await ctx.close()


async def _proposes_reject(w, kind: str) -> str:
    """A gate the proxy would reject: alice turned back this kind twice, approved once."""
    for text, action in (
        ("No: it drops the audit log. What's the rollback plan?", "reject"),
        ("Fine, ship it.", "approve"),
        ("No: it drops the audit log again.", "reject"),
    ):
        req = w.h.request(w.p, task_type=kind, escalation_mode="always", artifact="Drop the audit log table.")
        await run_answering(w.h, req, action=action, text=text)
    return await waiting(w, task_type=kind, question="Drop the audit log?", artifact="Drop the audit log table.")


@WIDTHS
async def test_no_one_tap_answer_needs_words_it_does_not_carry(world, width):
    w = world
    wid = await _proposes_reject(w, f"nowords-{width}")
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/?task_type=nowords-{width}")
    c = card(page, wid)
    assert "reject" in await c.locator(".guess").inner_text()
    assert await c.locator("form.tap button.reject, form.tap button.correct").count() == 0
    # The proxy's words under its reject are turned-back words of this kind, never an approval's.
    guess = await c.locator(".guess").inner_text()
    assert "Fine" not in guess and "ship it" not in guess, guess
    html = await page.content()
    await asyncio.sleep(1.1)
    for action in ("reject", "correct"):  # forged from the list: refused, nothing held
        sent = await ctx.request.post(
            f"{w.base}/answer",
            form={"csrf": _field(html, "csrf"), "shown": _field(html, "shown"), "workflow_id": wid, "action": action},
        )
        await page.set_content(await sent.text())
        assert "needs your words" in await page.locator(".flash.error, p.error").first.inner_text()
    # On its page, Reject without words is refused too, and says so.
    await page.goto(f"{w.base}/gates/{wid}")
    await page.get_by_role("button", name="Reject").click()
    await page.wait_for_url(f"{w.base}/gates/{wid}")
    assert "needs your words" in await page.locator("p.flash.error").inner_text()
    assert wid not in held_gates(w)
    await ctx.close()


@WIDTHS
async def test_a_refusal_says_not_yours_and_nothing_else(world, width):
    """Bob, off the allow-list: alice's gate and a gate that does not exist read the same."""
    w = world
    wid = await waiting(w, task_type=f"nosy-{width}", question="Rotate keys?", artifact="Rotate k-9.")
    ctx, page = await signed_in(w, "bob", width)
    pages, posts = [], []
    csrf = _field(await page.content(), "csrf")
    for gate in (wid, "vicar-gate/no-such-gate-at-all"):
        shown = await page.goto(f"{w.base}/gates/{gate}")
        pages.append((shown.status, await page.locator("main").inner_text()))
        sent = await ctx.request.post(f"{w.base}/answer", form={"csrf": csrf, "workflow_id": gate, "action": "approve"})
        await page.set_content(await sent.text())
        posts.append((sent.status, await page.locator("main").inner_text()))
    assert pages[0] == pages[1] and posts[0] == posts[1], (pages, posts)
    for status, said in pages + posts:
        assert status == 403 and "not yours to answer" in said, said
        assert "alice" not in said and "allow" not in said and w.p not in said, said
    assert (await wait_escalated(w.h.client, wid)).status is GateStatus.escalated
    await ctx.close()
