"""The inbox's server-side limits (issue 34, items 11, 12 and 14), in a real Chromium and
over real HTTP against the real server: signing out ends the session on the server (a
copied cookie opens nothing after); an account answers only for principals that let it
in (closed by default); /signin is rate-limited per client address and per account;
/static carries the pages' security headers; a POST the client abandons is one line in
the server's terminal, not a traceback."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx

from vicar.client.gates import start_gate
from vicar.inbox.accounts import add_user
from vicar.inbox.app import SESSION_COOKIE
from vicar.inbox.web import SECURITY_HEADERS
from vicar.models import GateStatus
from vicar.responders import change_allowed

from .conftest import wait_escalated
from .inbox_world import free_port, signed_in, world  # noqa: F401 (world: the module's fixture)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)


async def test_signing_out_ends_the_session_even_for_a_copied_cookie(world):
    w = world
    ctx, page = await signed_in(w, "alice")
    other_ctx, other_page = await signed_in(w, "alice")  # the same person on another device
    copied = [c for c in await ctx.cookies() if c["name"] == SESSION_COOKIE]
    assert copied
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(f"{w.base}/signin")
    # The cookie as it was before Sign out, replayed by another browser and by plain HTTP.
    thief = await w.browser.new_context()
    await thief.add_cookies(copied)
    stolen = await thief.new_page()
    await stolen.goto(f"{w.base}/")
    assert stolen.url == f"{w.base}/signin"
    async with httpx.AsyncClient(base_url=w.base) as http:
        replay = await http.get("/", headers={"cookie": f"{SESSION_COOKIE}={copied[0]['value']}"})
        assert replay.status_code == 303 and replay.headers["location"] == "/signin"
        forged = await http.post(
            "/answer",
            headers={"cookie": f"{SESSION_COOKIE}={copied[0]['value']}"},
            data={"workflow_id": "vicar-gate/x", "action": "approve"},
        )
        assert forged.status_code == 403
    # Signing out on one device leaves the other signed in.
    await other_page.goto(f"{w.base}/")
    assert other_page.url == f"{w.base}/" and await other_page.locator("form.who").count() == 1
    for c in (ctx, other_ctx, thief):
        await c.close()


async def test_an_account_answers_only_for_principals_that_let_it_in(world):
    """Issue 34 item 12: an account made without --principal answered for every
    principal with no allow-list. Now a principal without a list is answered in the
    inbox by itself only, until an operator lets a name in (or everyone, --anyone)."""
    w = world
    q = w.h.principal(responders=None)  # no allow-list
    gate = await start_gate(
        w.h.client, w.h.request(q, escalation_mode="always", artifact="Drop a table."), w.h.task_queue
    )
    await wait_escalated(w.h.client, gate.id)
    w.tokens["eve"] = add_user(w.h.settings.data_dir, "eve", [])[1]
    w.tokens[q] = add_user(w.h.settings.data_dir, q, [])[1]  # the principal's own account (as the demo's)
    for name in ("eve", "alice"):
        ctx, page = await signed_in(w, name)
        assert await page.locator(f'input.pick[value="{gate.id}"]').count() == 0, name
        response = await page.goto(f"{w.base}/gates/{gate.id}")
        assert response.status == 403, name
        said = await page.locator("p.error").inner_text()
        assert said == "not yours to answer", said  # nothing about who may, nor how to get in
        csrf = _csrf(await page.content())
        sent = await ctx.request.post(
            f"{w.base}/answer", form={"csrf": csrf, "workflow_id": gate.id, "action": "approve"}, max_redirects=0
        )
        assert sent.status == 403 and "not yours to answer" in await sent.text(), name
        await ctx.close()
    assert (await wait_escalated(w.h.client, gate.id)).status is GateStatus.escalated
    ctx, page = await signed_in(w, q)
    assert await page.locator(f'input.pick[value="{gate.id}"]').count() == 1  # the principal itself
    await ctx.close()
    # The explicit, logged choice opens the principal to every account.
    change_allowed(w.h.settings.principals_dir, q, "anyone", by="operator")
    ctx, page = await signed_in(w, "eve")
    await page.goto(f"{w.base}/gates/{gate.id}")
    await page.locator("section.answer button.approve").click()
    await page.wait_for_url(lambda url: url != f"{w.base}/gates/{gate.id}")  # held, then sent
    assert (await w.h.client.get_workflow_handle(gate.id).result())["responder"] == "eve"
    await ctx.close()


async def test_static_files_carry_the_pages_security_headers(world):
    async with httpx.AsyncClient(base_url=world.base) as http:
        for path, status in (("/static/inbox.css", 200), ("/static/inbox.js", 200), ("/static/nothing.css", 404)):
            got = await http.get(path)
            assert got.status_code == status, path
            for name, value in SECURITY_HEADERS.items():
                assert got.headers.get(name) == value, (path, name, got.headers.get(name))
        page = await http.get("/signin")
        assert all(page.headers.get(k) == v for k, v in SECURITY_HEADERS.items())


async def _signin(http: httpx.AsyncClient, token: str, address: str) -> httpx.Response:
    page = await http.get("/signin")
    return await http.post(
        "/signin",
        data={"csrf": _csrf(page.text), "token": token},
        headers={"x-forwarded-for": address},
    )


async def test_signin_is_rate_limited_per_address_and_per_account(world):
    """Wrong tokens from one address are refused 429 after a few (and then so is a right
    one from there: nothing is learnt while refused); another address is not held up.
    Sign-ins into one account are bounded too, wherever they come from. The addresses
    are X-Forwarded-For values the server trusts from loopback (its reverse proxy)."""
    w = world
    w.tokens["dora"] = add_user(w.h.settings.data_dir, "dora", [w.p])[1]
    async with httpx.AsyncClient(base_url=w.base) as http:
        codes = [(await _signin(http, f"wrong-{i}", "198.51.100.7")).status_code for i in range(40)]
        assert 429 in codes, codes
        first = codes.index(429)
        assert set(codes[:first]) == {403} and set(codes[first:]) == {429}, codes
        refused = await _signin(http, w.tokens["dora"], "198.51.100.7")
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert "Too many sign-in attempts" in refused.text
        assert SESSION_COOKIE not in refused.headers.get("set-cookie", "")
        assert (await _signin(http, "wrong", "198.51.100.8")).status_code == 403  # another address
        opened = [(await _signin(http, w.tokens["dora"], f"203.0.113.{i}")).status_code for i in range(40)]
        assert 429 in opened, opened
        first_refused = opened.index(429)
        assert set(opened[:first_refused]) == {303} and set(opened[first_refused:]) == {429}, opened
    from vicar.inbox.app import SIGNIN_ACCOUNT, SIGNIN_ADDRESS

    assert (first, first_refused) == (SIGNIN_ADDRESS.burst, SIGNIN_ACCOUNT.burst)


def test_the_limits_memory_is_bounded():
    from vicar.inbox.throttle import Limit, Throttle

    t = Throttle(Limit(burst=2, per_seconds=60, max_keys=100))
    for i in range(100_000):
        t.spend(f"10.0.{i // 256}.{i % 256}", now=1000.0)
    assert len(t) == 100
    assert t.wait("10.0.0.0", now=1000.0) == 0  # evicted long ago: a fresh bucket
    t.spend("a", now=0.0)
    t.spend("a", now=0.0)
    assert t.wait("a", now=0.0) == 30.0 and t.wait("a", now=30.0) == 0  # one refilled


def _serve(tmp_path, temporal_address: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {**os.environ, "VICAR_DATA_DIR": str(tmp_path), "TEMPORAL_ADDRESS": temporal_address}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vicar.cli", "inbox", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1])
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("vicar inbox did not listen")


async def test_a_post_the_client_abandons_is_one_line_in_the_terminal(world, tmp_path):
    """A client that declares a form and hangs up before sending it (a phone losing its
    network): the real `vicar inbox` process says so in one line, no traceback."""
    token = add_user(tmp_path, "alice", ["alice"])[1]
    proc, port = _serve(tmp_path, world.h.client.service_client.config.target_host)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await _signin(http, token, "127.0.0.1")).status_code == 303
            cookie = f"{SESSION_COOKIE}={http.cookies[SESSION_COOKIE]}"
        for path in ("/signin", "/answer", "/batch/approve"):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\n"
                    "Content-Length: 100000\r\n\r\ncsrf=abc&token=".encode()
                )
                await asyncio.sleep(0.5)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/signin")).status_code == 200  # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "went away" in line]
    assert [line.split("POST ")[1].split()[0] for line in lines] == ["/signin", "/answer", "/batch/approve"], err
