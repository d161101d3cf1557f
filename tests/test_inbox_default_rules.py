"""The inbox's rules page lists Vicar's default rules beside the person's own, marked
default, each with why it asks; the person removes one (asked first) and brings it back,
in Chromium at 390 and 1280 px against a real brain."""

from __future__ import annotations

import asyncio
import time

import pytest

from vicar.client import get_control
from vicar.inbox.oversight_pages import CACHE_SECONDS
from vicar.models.control import DEFAULT_RULES

from .inbox_checks import overflow, shot, small_targets
from .inbox_world import signed_in, world  # noqa: F401 (world: the module's fixture)


@pytest.mark.parametrize("width", [390, 1280])
async def test_default_rules_are_listed_removed_and_brought_back(world, width):  # noqa: F811
    w = world
    name = "default-publish"
    ctx, page = await signed_in(w, "alice", width)
    await page.goto(f"{w.base}/rules")
    listed = await page.locator("ul.defaults li").all_inner_texts()
    assert len(listed) == len(DEFAULT_RULES)
    assert any(name in t and "publishes a package" in t and "(default)" in t for t in listed), listed
    await page.get_by_role("button", name=f"remove rule {name}").click()
    assert name not in (await get_control(w.h.client, w.p)).removed_defaults  # asked first
    await page.get_by_role("button", name=f"Remove “{name}”").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert name in (await get_control(w.h.client, w.p)).removed_defaults
    gone = page.locator("ul.defaults li.removed")
    assert await gone.count() == 1 and "removed" in await gone.inner_text()
    assert not await overflow(page) and not await small_targets(page)
    await shot(page, f"inbox-default-rules-{width}.png")
    await page.get_by_role("button", name=f"bring back rule {name}").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert name not in (await get_control(w.h.client, w.p)).removed_defaults
    await ctx.close()


async def test_a_habit_is_offered_as_a_rule_and_made_one_with_a_tap(world):  # noqa: F811
    from .test_gate import run_answering

    w = world
    for i in range(5):  # asked every time: the person's five identical answers
        req = w.h.request(
            w.p,
            task_type="bash",
            artifact=f"$ git fetch origin {i}\n",
            lineage="bash:git fetch",
            question="Run git fetch?",
            state="INTENT_ASSERT",
            escalation_mode="always",
        )
        await run_answering(w.h, req, text="fine")
    ctx, page = await signed_in(w, "alice", 390)
    # The page reads the trail at most every CACHE_SECONDS (an earlier test of this module
    # may have read it before these answers): offered within that.
    deadline = time.monotonic() + CACHE_SECONDS + 10
    while True:
        await page.goto(f"{w.base}/rules")
        offered = await page.locator("ul.suggested li").all_inner_texts()
        if any("git fetch" in t and "approved it 5 times" in t for t in offered) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    assert any("git fetch" in t and "approved it 5 times" in t for t in offered), offered
    assert "habit-bash-git-fetch" not in {r.name for r in (await get_control(w.h.client, w.p)).rules}
    await page.get_by_role("button", name="make habit-bash-git-fetch my rule").click()
    await page.wait_for_url(f"{w.base}/rules")
    rules = {r.name: r for r in (await get_control(w.h.client, w.p)).rules}
    assert (
        rules["habit-bash-git-fetch"].lineages == ["bash:git fetch"] and rules["habit-bash-git-fetch"].author == "alice"
    )
    assert await page.locator("ul.suggested").count() == 0  # taken: no longer offered
    await ctx.close()
