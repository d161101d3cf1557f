"""`vicar inbox` as its own process, signed in over HTTP: for the tests that kill, freeze
or starve what is around it (the held answers' tests)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from vicar.runtime.server import free_port


def form_field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found is not None, (name, html[:300])
    return found[1]


@dataclass
class InboxProcess:
    """`vicar inbox` on a free port with this environment (a None value removes a
    variable); its log in `log_path`."""

    env: dict[str, str | None]
    log_path: Path
    proc: subprocess.Popen | None = None
    base: str = ""
    http: httpx.AsyncClient | None = None  # one session, as a browser keeps it

    async def start(self, timeout: float = 60.0) -> None:
        port = free_port()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vicar.cli", "inbox", "--port", str(port)],
                env={k: v for k, v in {**os.environ, **self.env}.items() if v is not None},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.base = f"http://127.0.0.1:{port}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            assert self.proc.poll() is None, f"vicar inbox exited: {self.log()[-2000:]}"
            try:
                async with httpx.AsyncClient() as probe:
                    if (await probe.get(f"{self.base}/signin")).status_code == 200:
                        return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"vicar inbox did not serve: {self.log()[-2000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def sign_in(self, token: str) -> None:
        self.http = httpx.AsyncClient(base_url=self.base, timeout=60)
        csrf = form_field((await self.http.get("/signin")).text, "csrf")
        assert (await self.http.post("/signin", data={"csrf": csrf, "token": token})).status_code == 303

    async def answer(self, wid: str, action: str = "approve") -> str:
        """Answer from the gate's page: held for the undo window. Where the inbox went next."""
        assert self.http is not None
        page = (await self.http.get(f"/gates/{wid}")).text
        form = {"csrf": form_field(page, "csrf"), "workflow_id": wid, "action": action}
        for name in ("seen", "shown"):  # what the page gives its own forms, as a browser sends them
            if f'name="{name}"' in page:
                form[name] = form_field(page, name)
        await asyncio.sleep(1.5)  # read before answering: the inbox refuses a tap faster than a person

        reply = await self.http.post("/answer", data=form)
        assert reply.status_code == 303, (reply.status_code, reply.text[:500])
        return reply.headers.get("location", "")

    async def page(self, path: str = "/") -> str:
        assert self.http is not None
        return (await self.http.get(path)).text

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def said(html: str) -> list[str]:
    """The lines about held answers on a page (p.flash.said), as text."""
    import html as html_lib

    return [
        html_lib.unescape(re.sub(r"<[^>]+>", "", m)).strip()
        for m in re.findall(r'<p class="flash said[^"]*"[^>]*>(.*?)</p>', html, re.S)
    ]
