"""Refresh the Temporal UI screenshots in docs/: the gate list filtered to escalations, and
one escalated gate's page. A throwaway data directory, the embedded server and an
in-process worker; three gates of a new principal escalate (the proxy has earned
nothing yet), then headless Chromium photographs the UI.

    python docs/screenshots.py [--chromium /usr/bin/chromium] [--out docs]

Chromium: `apt-get install chromium` (Debian). Nothing here is used by Vicar itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from vicar.client.gates import start_gate
from vicar.models import GateRequest, GateStatus
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client

ESCALATIONS = 'WorkflowType = "VicarGate" AND VicarStatus = "escalated" AND ExecutionStatus = "Running"'
GATES = [
    ("PLAN_ASSERT", "db-migration", "Approve the plan to add a NOT NULL column to users?"),
    ("WORK_ASSERT", "docs", "Ship the rewritten install guide?"),
    ("INTENT_ASSERT", "refactor", "Split the billing module into three services?"),
]
# Chromium must not reach out (the machine's network is closed) and has no GPU here.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1600,1000",
    "--remote-debugging-port=0",
]
# The UI is a single-page app that keeps polling: it never goes idle, so Chromium's own
# --screenshot either fires before the data is drawn or waits for ever. Instead, the page
# is driven over the DevTools protocol and photographed after this long.
SETTLE_SECONDS = 6.0


def photograph(chromium: str, url: str, out: Path, tab: str | None = None) -> None:
    """A screenshot of `url` once drawn; with `tab`, after clicking the UI tab of that name."""
    import base64
    import json
    import time
    import urllib.request

    import websocket  # websocket-client, installed with Vicar's dependencies

    # Chromium's helpers may still write to the profile as it is removed.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            for _ in range(100):
                if port_file.exists() and port_file.read_text().strip():
                    break
                time.sleep(0.1)
            else:
                sys.exit(f"error: chromium did not start ({chromium})")
            port = port_file.read_text().split()[0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
                page = next(t for t in json.load(reply) if t["type"] == "page")
            ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)

            def call(method: str, **params):
                call.n = getattr(call, "n", 0) + 1
                ws.send(json.dumps({"id": call.n, "method": method, "params": params}))
                while True:
                    message = json.loads(ws.recv())
                    if message.get("id") == call.n:
                        return message.get("result", {})

            call("Page.enable")
            call("Page.navigate", url=url)
            time.sleep(SETTLE_SECONDS)
            if tab:
                found = call(
                    "Runtime.evaluate",
                    returnByValue=True,
                    expression=(
                        "(() => { const t = [...document.querySelectorAll('a, button')]"
                        f".find(e => e.textContent.trim().startsWith({json.dumps(tab)}));"
                        " t && t.click(); return !!t; })()"
                    ),
                )
                if not found.get("result", {}).get("value"):
                    sys.exit(f"error: no {tab!r} tab on {url}")
                time.sleep(SETTLE_SECONDS / 2)
            out.write_bytes(base64.b64decode(call("Page.captureScreenshot", format="png")["data"]))
            ws.close()
        finally:
            browser.terminate()
            browser.wait(timeout=30)
    print(f"wrote {out}")


async def main(args: argparse.Namespace) -> None:
    os.environ["VICAR_DATA_DIR"] = tempfile.mkdtemp(prefix="vicar-shots-")
    settings = Settings.from_env()
    async with temporal_client(settings, embedded=True) as (client, server):
        worker, registry = build_worker(client, settings)
        async with worker:
            handles = [
                await start_gate(
                    client,
                    GateRequest(
                        principal="alice",
                        gate_id=f"shot-{i}",
                        state=state,
                        task_type=task,
                        question=question,
                        artifact_text="(the artifact)",
                    ),
                    settings.task_queue,
                )
                for i, (state, task, question) in enumerate(GATES)
            ]
            for _ in range(300):  # each goes to the human: a new principal's proxy has earned nothing
                shown = [await h.query("details") for h in handles]
                if all(d and d["status"] == GateStatus.escalated.value for d in shown):
                    break
                await asyncio.sleep(0.1)
            base = f"{server.ui_url}/namespaces/{client.namespace}/workflows"
            desc = await handles[0].describe()
            await asyncio.to_thread(
                photograph, args.chromium, f"{base}?query={quote(ESCALATIONS)}", args.out / "ui-escalations.png"
            )
            page = f"{base}/{quote(desc.id, safe='')}/{desc.run_id}"
            await asyncio.to_thread(photograph, args.chromium, page, args.out / "ui-gate.png")
            # The summary, the details and how to answer (current details once escalated).
            await asyncio.to_thread(photograph, args.chromium, page, args.out / "ui-gate-metadata.png", "User Metadata")
            for h in handles:
                await h.terminate(reason="screenshots taken")
        registry.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    asyncio.run(main(ap.parse_args()))
