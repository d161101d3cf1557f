"""The web inbox as a person uses it, in a real headless Chromium (Debian's, driven by
Playwright) against the real Temporal test server and a real worker: sign in with the
personal link, open a waiting gate, read its artifact and the proxy's words, approve
it; approve three together; mark an answer the proxy gave alone wrong. Someone the
allow-list does not name, and a form without its CSRF token, are refused. Their rules
and the pause switch; hostile text shown as text; oversized forms refused in one line.

VICAR_SCREENSHOTS=1 rewrites docs/img/inbox-*.png from the same pages."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from vicar.client.gates import start_gate
from vicar.models import GateStatus

from .conftest import wait_escalated
from .inbox_world import DOCS_IMG, screenshot, signed_in, world  # noqa: F401 (world: the module's fixture)


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
        if os.environ.get("VICAR_SCREENSHOTS") == "1":  # what the phone shows: the answer bar at the bottom
            await page.screenshot(path=str(DOCS_IMG / f"inbox-gate-{suffix}.png"))
        await page.goto(f"{w.base}/")
        await screenshot(page, f"inbox-list-{suffix}.png")
        # Usable at a phone's width: nothing wider than the screen.
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await page.goto(f"{w.base}/gates/{w.waiting}")
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
    await page.locator("section.answer button.approve").click()
    # Held for the undo window, and the next waiting gate opens (not a dead end).
    await page.wait_for_url(lambda url: url != f"{w.base}/gates/{w.waiting}" and "/answer" not in url)
    assert "approve Merge this docs-only change?" in await page.locator("form.held").inner_text()
    result = await w.h.client.get_workflow_handle(w.waiting).result()
    assert (result["action"], result["answered_by"], result["responder"]) == ("approve", "human", "alice")
    assert result["responder_identity"] == "alice"  # the inbox answers with the account's Temporal identity
    await ctx.close()


async def test_approve_three_together_after_a_confirmation(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    for wid in w.batch:
        await page.locator(f'input.pick[value="{wid}"]').check()
    await page.get_by_role("button", name="Approve selected (3)").click()
    await page.wait_for_url(f"{w.base}/batch")
    listed = page.locator("ol.confirm li")
    assert await listed.count() == 3
    for wid in w.batch:
        assert await page.locator(f'ol.confirm input[value="{wid}"]').count() == 1
    await page.get_by_role("button", name="Approve all 3").click()
    await page.wait_for_url(f"{w.base}/batch/approve")
    assert "Approving 3 of 3" in await page.locator("h1").inner_text()
    for wid in w.batch:
        result = await w.h.client.get_workflow_handle(wid).result()
        assert (result["action"], result["responder"]) == ("approve", "alice")
    await ctx.close()


async def test_approve_on_the_list_and_stay_on_it_as_filtered(world):
    w = world
    gates = []
    for i in range(2):
        req = w.h.request(w.p, task_type="list-tap", escalation_mode="always", artifact=f"Bump dep {i}.")
        gates.append((await start_gate(w.h.client, req, w.h.task_queue)).id)
    for wid in gates:
        await wait_escalated(w.h.client, wid)
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/?task_type=list-tap")
    first = page.locator("li.gate", has=page.locator(f'input[value="{gates[0]}"]'))
    await first.get_by_role("button", name="Approve").click()
    await page.wait_for_url(f"{w.base}/?task_type=list-tap")
    assert "Held: approve Approve or revise" in await page.locator("form.held").inner_text()
    assert await page.locator(f'input.pick[value="{gates[0]}"]').count() == 0  # held: off the list
    assert await page.locator(f'input.pick[value="{gates[1]}"]').count() == 1  # the other one waits
    assert await page.locator('select[name="task_type"] option[selected]').inner_text() == "list-tap"
    result = await w.h.client.get_workflow_handle(gates[0]).result()
    assert (result["action"], result["responder"]) == ("approve", "alice")
    await page.reload()
    assert "sent: approve Approve or revise" in await page.locator("p.flash.said").inner_text()
    await page.reload()
    assert await page.locator("p.flash").count() == 0  # said once
    # Tapped again (a stale list): the list comes back with why, not an error page.
    again = await ctx.request.post(
        f"{w.base}/answer",
        form={
            "csrf": await page.locator('input[name="csrf"]').first.get_attribute("value"),
            "workflow_id": gates[0],
            "action": "approve",
            "back": "/?task_type=list-tap",
        },
    )
    await page.set_content(await again.text())
    said = await page.locator("p.flash.error").inner_text()
    assert said.startswith(f"not answered: {gates[0]} · ") and "\n" not in said
    await ctx.close()


async def test_mark_an_answer_the_proxy_gave_alone_wrong(world):
    from vicar.client.audit import audit_pages

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.get_by_role("link", name="Answered alone").click()
    item = page.locator("li.gate", has=page.locator(f'input[value="{w.alone}"]'))
    await item.locator("summary", has_text="Wrong").click()
    await item.get_by_role("button", name="Mark wrong").click()
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
    assert await page.locator("p.error").inner_text() == "not yours to answer"  # nothing about who may
    # Even with his own valid CSRF token, a forged answer is refused.
    await page.goto(f"{w.base}/signin")
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    sent = await ctx.request.post(
        f"{w.base}/answer", form={"csrf": csrf, "workflow_id": gate.id, "action": "approve"}, max_redirects=0
    )
    assert sent.status == 403 and "not yours to answer" in await sent.text()
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
    await page.wait_for_url(lambda url: url != f"{w.base}/gates/{gate.id}")
    assert (await w.h.client.get_workflow_handle(gate.id).result())["responder"] == "alice"
    await ctx.close()


async def test_a_gate_that_is_not_one_is_a_page_saying_so(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    for path, status, said in (
        ("/gates/vicar-gate/no-such-gate", 403, "not yours to answer"),  # as another's gate: no oracle
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
    await page.get_by_role("button", name="Ask", exact=True).click()
    await page.wait_for_url(f"{w.base}/gates/{gate.id}")
    assert "Is there a backup?" in await page.locator("ul.dialog").inner_text()
    d = await wait_escalated(w.h.client, gate.id)  # asked, and waiting again
    assert any(t.text == "Is there a backup?" and t.responder == "alice" for t in d.dialog)
    await page.reload()
    await page.locator("#words").fill("Not without a backup.")
    await page.get_by_role("button", name="Reject").click()
    await page.wait_for_url(lambda url: url != f"{w.base}/gates/{gate.id}")
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


async def test_a_rule_added_in_the_page_decides_the_next_gate_it_matches(world):
    from vicar.client import get_control

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/rules")
    section = page.locator("section.control", has_text=w.p)
    await section.get_by_text("Add a rule").click()
    await section.get_by_label("Name").fill("no-table-drops")
    await section.get_by_label("Then").select_option("reject")
    await section.get_by_label("The answer's words").fill("Never drop a table from a docs change.")
    await section.get_by_label("Regular expression").fill(r"(a)\1")  # a back-reference: RE2 refuses it
    await section.get_by_role("button", name="Add the rule").click()
    # One line on the page, beside what was typed; nothing added.
    error = section.locator("p.error")
    said = (await error.inner_text()).strip()
    assert said.startswith("rule not added: regex: regex '(a)") and "\n" not in said and "Value error" not in said
    assert await section.get_by_label("Name").input_value() == "no-table-drops"
    assert not (await get_control(w.h.client, w.p)).rules
    await screenshot(page, "inbox-rules.png")
    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390  # usable on a phone
    await page.set_viewport_size({"width": 1280, "height": 900})
    await section.get_by_label("Regular expression").fill("")
    await section.get_by_label("Task types").fill("docs")
    await section.get_by_label("Words or phrases").fill("DROP TABLE")
    await section.get_by_role("button", name="Add the rule").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert (
        "no-table-drops: reject when task type is docs" in await section.locator("ul.rules:not(.defaults)").inner_text()
    )
    (rule,) = (await get_control(w.h.client, w.p)).rules
    assert (rule.author, rule.words, rule.task_types) == ("alice", ["DROP TABLE"], ["docs"])
    # The proxy answers docs changes alone by now (escalation mode never); the rule wins.
    req = w.h.request(w.p, task_type="docs", escalation_mode="never", artifact="Fix typo 10; also DROP TABLE users;")
    gate = await start_gate(w.h.client, req, w.h.task_queue)
    result = await w.h.client.get_workflow_handle(gate.id).result()
    assert (result["action"], result["answered_by"], result["responder"]) == ("reject", "rule", "alice")
    assert result["text"] == "Never drop a table from a docs change."
    await section.get_by_role("button", name="remove rule no-table-drops").click()
    await section.get_by_role("button", name="Remove “no-table-drops”").click()  # it asks first
    await page.wait_for_url(f"{w.base}/rules")
    assert not (await get_control(w.h.client, w.p)).rules
    await ctx.close()


async def test_pause_one_task_type_then_lift_that_pause(world):
    from vicar.client import get_control

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/rules")
    section = page.locator("section.control", has_text=w.p)
    await section.get_by_label("pause which task type").fill("docs")
    await section.get_by_role("button", name="Pause the proxy").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert "PAUSED for docs" in await section.inner_text()
    (pause,) = (await get_control(w.h.client, w.p)).pauses
    assert (pause.by, pause.state, pause.task_type) == ("alice", None, "docs")
    # A docs gate the proxy would answer alone now asks; another task type does not.
    docs = await start_gate(w.h.client, w.h.request(w.p, task_type="docs", escalation_mode="never"), w.h.task_queue)
    assert (await wait_escalated(w.h.client, docs.id)).calibration_guard == "paused"
    await section.get_by_role("button", name="lift the pause of docs").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert not (await get_control(w.h.client, w.p)).pauses
    await ctx.close()


HOSTILE = '<script>alert("script")</script> "><img src=x onerror=alert("img")>'


async def test_hostile_text_in_a_gate_is_shown_as_text(world):
    w = world
    req = w.h.request(
        w.p,
        escalation_mode="always",
        question=f"Merge it? {HOSTILE}",
        artifact=f"A change. {HOSTILE}",
        actor_message=f"Trust me. {HOSTILE}",
    )
    gate = await start_gate(w.h.client, req, w.h.task_queue)
    await wait_escalated(w.h.client, gate.id)
    ctx, page = await signed_in(w, "alice")
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message) or asyncio.ensure_future(d.dismiss()))
    await page.reload()
    row = page.locator("li.gate", has=page.locator(f'input[value="{gate.id}"]'))
    assert HOSTILE in await row.locator("a.q").inner_text()
    await page.goto(f"{w.base}/gates/{gate.id}")
    assert HOSTILE in await page.locator("h1.question").inner_text()
    said = await page.locator("section.artifact").inner_text()
    assert f"A change. {HOSTILE}" in said and f"Trust me. {HOSTILE}" in said
    assert await page.locator("main img, main script").count() == 0  # nothing became markup
    assert dialogs == []
    await ctx.close()


async def test_oversized_forms_are_refused_in_one_line(world):
    w = world
    gate = await start_gate(w.h.client, w.h.request(w.p, escalation_mode="always"), w.h.task_queue)
    await wait_escalated(w.h.client, gate.id)
    ctx, page = await signed_in(w, "alice")
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    limit = w.h.settings.limits.answer_text
    thousands = "&".join(f"workflow_id=vicar-gate/g{i}" for i in range(5000))
    for path, body, status, said in (
        ("/answer", {"workflow_id": gate.id, "action": "correct", "text": "x" * (limit + 1)}, 400, f"limit of {limit}"),
        ("/batch/approve", thousands, 400, "at most 1,000 gates at once"),
        ("/answer", {"workflow_id": gate.id, "action": "correct", "text": "x" * 600_000}, 413, "over 512 KB"),
    ):
        if isinstance(body, str):
            sent = await ctx.request.post(
                f"{w.base}{path}",
                data=f"csrf={csrf}&{body}",
                headers={"content-type": "application/x-www-form-urlencoded"},
                max_redirects=0,
            )
        else:
            sent = await ctx.request.post(f"{w.base}{path}", form={"csrf": csrf, **body}, max_redirects=0)
        assert sent.status == status, (path, await sent.text())
        await page.set_content(await sent.text())
        (line,) = await page.locator("p.error").all_inner_texts()
        assert said in line and "Traceback" not in await sent.text()
    # A thousand ids that are no gate of hers cost one listing, not a thousand calls.
    ids = "&".join(f"workflow_id=vicar-gate/nothing-{i}" for i in range(1000))
    sent = await ctx.request.post(
        f"{w.base}/batch/approve",
        data=f"csrf={csrf}&{ids}",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    await page.set_content(await sent.text())
    assert "Approved 0 of 1000" in await page.locator("h1").inner_text()
    assert await page.locator("ul.results li", has_text="not waiting for you").count() == 1000
    assert (await wait_escalated(w.h.client, gate.id)).status is GateStatus.escalated
    await ctx.close()


async def test_vicar_inbox_on_a_busy_port_is_one_line_and_exit_5(world, tmp_path):
    # Another process listens on the port.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\ns = socket.create_server(('127.0.0.1', 0))\n"
            "print(s.getsockname()[1], flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = holder.stdout.readline().strip()
        env = {
            **os.environ,
            "VICAR_DATA_DIR": str(tmp_path),
            "TEMPORAL_ADDRESS": world.h.client.service_client.config.target_host,
        }
        done = subprocess.run(
            [sys.executable, "-m", "vicar.cli", "inbox", "--port", port],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 5, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use by another process: stop it or pass another --port"
    ]


def test_every_template_escapes_what_it_shows(tmp_path):
    import re

    from vicar.inbox.web import HERE, Inbox
    from vicar.settings import Settings

    env = Inbox(settings=Settings(data_dir=tmp_path)).templates
    names = env.list_templates()
    assert "gate.html" in names and all(env.autoescape(n) is True for n in names if n.endswith(".html"))
    assert all(n.endswith(".html") for n in names)  # no template escapes by another rule
    # The one value marked safe is the chart, built by vicar.inbox.render from numbers and dates.
    unescaped = {
        n: re.findall(r"\|\s*safe|autoescape\s+false|Markup", (HERE / "templates" / n).read_text()) for n in names
    }
    assert {n: hits for n, hits in unescaped.items() if hits} == {"health.html": ["|safe"]}


def test_a_tap_returns_only_to_the_list():
    from vicar.inbox.gate_pages import list_address

    assert list_address("principal=p1&next=https://evil.example/&state=") == "/?principal=p1"
    assert list_address("task_type=a%26b&state=PLAN_ASSERT") == "/?task_type=a%26b&state=PLAN_ASSERT"
    assert list_address("") == "/"
