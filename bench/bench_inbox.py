"""The inbox's speed with many waiting gates (issue 28: the list with 1,000 waiting gates
in <= 1 s p95, a gate page in <= 300 ms p95; issue 37: a gate answered from the list on a
phone in <= 2 taps, <= 1 s p95 per page; issue 39: a batch approved over one connection).

    python -m bench.bench_inbox --gates 1000 --principals 50 --out bench/INBOX_RESULTS.md

A Temporal dev server (the same binary and search attributes as the tests) and a worker
in this process; N real gates over P principals, every one asking the human (escalation
mode always), all waiting at once. Then the inbox (uvicorn on loopback, the app
`vicar inbox` in its own process) is signed into over HTTP and timed: the list page (every waiting
gate, one account answering for every principal), then gate pages of gates drawn at
random. Times are the whole HTTP exchange seen by the client, rendering included. A tap
on the list is its POST and the list it returns to; a batch is held for the inbox's undo
window (vicar/inbox/held.py) and then sent over the account's one connection: timed from
the window's close to the last gate answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from bench.machine_info import command_line, machine_line
from vicar.client.gates import list_escalations, start_gate
from vicar.inbox.accounts import add_user
from vicar.models import GateRequest
from vicar.responders import save_allowed
from vicar.runtime.codec import data_converter, new_key_line
from vicar.runtime.server import temporal_binary
from vicar.settings import Settings
from vicar.worker import build_worker
from vicar.workflows import search_attributes as sa

# Read by Settings in this process's worker and by `vicar inbox`, which inherits them.
os.environ.setdefault("VICAR_PREDICTOR", "offline")
os.environ.setdefault("VICAR_CODEC_KEYS", new_key_line("bench"))

DIFF = "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-x = {i}\n+x = {j}\n"


PERSISTENCE_QPS = 20_000
SETTLE_SECONDS = 10  # after the last gate escalates: its brain and side effects finish first


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18] if len(xs) > 1 else xs[0]


async def open_gates(client, task_queue: str, n: int, principals: int) -> list[str]:
    limit = asyncio.Semaphore(32)

    async def one(i: int) -> str:
        req = GateRequest(
            principal=f"bench-{i % principals:03d}",
            gate_id=f"inbox-bench-{uuid.uuid4().hex[:10]}",
            state="WORK_ASSERT",
            task_type=("docs", "db-migration", "api")[i % 3],
            question=f"Merge change {i}?",
            artifact_text=DIFF.format(i=i, j=i + 1),
            upstream_agent="bench-agent",
            escalation_mode="always",
        )
        async with limit:
            return (await start_gate(client, req, task_queue)).id

    return await asyncio.gather(*(one(i) for i in range(n)))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gates", type=int, default=1000)
    ap.add_argument("--principals", type=int, default=50)
    ap.add_argument("--list-runs", type=int, default=30)
    ap.add_argument("--page-runs", type=int, default=100)
    ap.add_argument("--batch-runs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="vicar-inbox-bench-"))
    settings = Settings(data_dir=home)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        search_attributes=sa.ALL,
        data_converter=data_converter(),
        dev_server_log_level="error",
        # The dev server's frontend allows 2,000 persistence operations a second by default;
        # a thousand gates' workers and brains settling beside the timed pages exhausted it
        # once ("System Persistence Max QPS Reached" on a listing).
        dev_server_extra_args=["--dynamic-config-value", f"frontend.persistenceMaxQPS={PERSISTENCE_QPS}"],
    )
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker, registry = build_worker(env.client, settings, task_queue=task_queue)
    settings = settings.model_copy(update={"task_queue": task_queue})
    lines = []
    try:
        async with worker:
            t0 = time.monotonic()
            wids = await open_gates(env.client, task_queue, args.gates, args.principals)
            while len(waiting := await list_escalations(env.client)) < args.gates:
                print(f"{len(waiting)}/{args.gates} waiting after {time.monotonic() - t0:.0f} s", file=sys.stderr)
                await asyncio.sleep(5)
            setup = time.monotonic() - t0
            print(f"{args.gates} gates waiting after {setup:.0f} s", file=sys.stderr)
            await asyncio.sleep(SETTLE_SECONDS)
            _, token = add_user(home, "reviewer", [])
            for k in range(args.principals):  # closed by default: each principal lets the reviewer in
                save_allowed(settings.principals_dir, f"bench-{k:03d}", ["reviewer"])
            port = _free_port()
            # `vicar inbox` itself, in its own process, as a deployment runs it.
            inbox = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "vicar.cli",
                "inbox",
                "--port",
                str(port),
                env={
                    **os.environ,
                    "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
                    "VICAR_TASK_QUEUE": task_queue,
                    "VICAR_DATA_DIR": str(home),
                },
            )
            await _until_up(port)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                page = await http.get("/signin")
                csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
                signed = await http.post("/signin", data={"csrf": csrf, "token": token})
                assert signed.status_code == 303, signed.text[:200]
                list_times, page_times = [], []
                for _ in range(args.list_runs):
                    t = time.perf_counter()
                    r = await http.get("/")
                    list_times.append(time.perf_counter() - t)
                    assert r.status_code == 200 and r.text.count('class="gate"') == args.gates, r.text[:300]
                list_bytes = len(r.content)
                csrf = r.text.split('name="csrf" value="')[1].split('"')[0]  # signing in began a new session
                for wid in random.Random(1).choices(wids, k=args.page_runs):
                    t = time.perf_counter()
                    r = await http.get(f"/gates/{wid}")
                    page_times.append(time.perf_counter() - t)
                    assert r.status_code == 200 and "Merge change" in r.text, r.text[:300]
                page_bytes = len(r.content)
                # Batches approved from the confirmation page's form: one listing, then held for
                # the undo window, then sent together over the account's connection.
                batch_times, send_times, batch_left = [], [], list(reversed(wids))
                for _ in range(args.batch_runs):
                    chosen = [batch_left.pop() for _ in range(args.batch_size)]
                    t = time.perf_counter()
                    r = await http.post("/batch/approve", data={"csrf": csrf, "workflow_id": chosen})
                    batch_times.append(time.perf_counter() - t)
                    assert f"Approving {len(chosen)} of {len(chosen)}" in r.text, r.text[:300]
                    (held,) = [json.loads(f.read_text()) for f in (home / "inbox" / "held").glob("*.json")]
                    await asyncio.gather(*(env.client.get_workflow_handle(w).result() for w in chosen))
                    send_times.append(time.time() - held["due"])
                # One tap on the list: the approve's POST, then the list it returns to.
                tap_times, tap_post_times = [], []
                for _ in range(args.batch_runs):
                    wid = batch_left.pop()
                    t = time.perf_counter()
                    r = await http.post(
                        "/answer", data={"csrf": csrf, "workflow_id": wid, "action": "approve", "back": "/"}
                    )
                    tap_post_times.append(time.perf_counter() - t)
                    assert r.status_code == 303 and r.headers["location"] == "/", r.text[:300]
                    t = time.perf_counter()
                    r = await http.get("/")
                    tap_times.append(time.perf_counter() - t)
                    assert "Held: <b>approve Merge change" in r.text, r.text[:300]
                # A hostile batch: 1,000 ids that are no waiting gate cost the one listing.
                hostile_times = []
                for _ in range(3):
                    t = time.perf_counter()
                    r = await http.post(
                        "/batch/approve",
                        data={"csrf": csrf, "workflow_id": [f"vicar-gate/no-{i}" for i in range(1000)]},
                    )
                    hostile_times.append(time.perf_counter() - t)
                    assert "Approved 0 of 1000" in r.text, r.text[:300]
            inbox.terminate()
            await inbox.wait()
    finally:
        registry.close()
        await env.shutdown()
    lines = [
        f"Machine: {machine_line()}",
        f"{args.gates} real waiting gates over {args.principals} principals, opened and escalated in {setup:.0f} s.",
        "",
        "| page | runs | p50 | p95 | max | goal |",
        "|---|---|---|---|---|---|",
        f"| list, all {args.gates} gates | {len(list_times)} | {statistics.median(list_times) * 1000:.0f} ms "
        f"| {p95(list_times) * 1000:.0f} ms | {max(list_times) * 1000:.0f} ms | <= 1000 ms |",
        f"| gate page | {len(page_times)} | {statistics.median(page_times) * 1000:.0f} ms "
        f"| {p95(page_times) * 1000:.0f} ms | {max(page_times) * 1000:.0f} ms | <= 300 ms |",
        f"| a tap on the list: its POST | {len(tap_post_times)} | {statistics.median(tap_post_times) * 1000:.0f} ms "
        f"| {p95(tap_post_times) * 1000:.0f} ms | {max(tap_post_times) * 1000:.0f} ms | <= 1000 ms |",
        f"| a tap on the list: the list it returns to | {len(tap_times)} "
        f"| {statistics.median(tap_times) * 1000:.0f} ms "
        f"| {p95(tap_times) * 1000:.0f} ms | {max(tap_times) * 1000:.0f} ms | <= 1000 ms |",
        f"| approve {args.batch_size} together: the page (held) | {len(batch_times)} "
        f"| {statistics.median(batch_times) * 1000:.0f} ms "
        f"| {p95(batch_times) * 1000:.0f} ms | {max(batch_times) * 1000:.0f} ms | |",
        f"| approve {args.batch_size} together: sent, window's close to the last answer | {len(send_times)} "
        f"| {statistics.median(send_times) * 1000:.0f} ms "
        f"| {p95(send_times) * 1000:.0f} ms | {max(send_times) * 1000:.0f} ms | one connection |",
        f"| a batch of 1,000 ids that are no gate | {len(hostile_times)} "
        f"| {statistics.median(hostile_times) * 1000:.0f} ms | {p95(hostile_times) * 1000:.0f} ms "
        f"| {max(hostile_times) * 1000:.0f} ms | refused per id, one listing |",
        "",
        f"(the list page: {list_bytes:,} bytes; the last gate page: {page_bytes:,} bytes; load average at the end "
        f"{os.getloadavg()[0]:.1f} on this machine's cores, shared with other jobs)",
    ]
    print("\n".join(lines))
    if args.out:
        cmd = command_line()
        args.out.write_text(
            "# The inbox with many waiting gates\n\n"
            "Issue 28: the list with 1,000 waiting gates served in <= 1 s p95, a gate page in <= 300 ms p95.\n\n"
            f"    {cmd}\n\n" + "\n".join(lines) + "\n\n" + NOTES
        )


NOTES = """What is measured: the client's whole HTTP exchange with `vicar inbox`'s app on
loopback (`vicar inbox`: uvicorn, one process), signed in as one account that answers for every
principal. The list reads every waiting gate from Temporal's visibility (search
attributes and the memo each gate writes when it escalates: no query, no history per
gate) and renders them all; the gate page is `vicar.client.view.gate_view` (the request
from history, the details and the artifact excerpts by query to the running worker, the
result if finished) plus one describe per pre-review item for its date. Gates were
real: started on the dev server and escalated by a real worker, which keeps running
during the timing to answer the gate pages' queries. A batch approval first lists the
gates waiting for the account (one listing, as the list page's), holds only those (one
file, fsynced, for the undo window: 10 s in `vicar inbox`), and reports any other id as
not waiting without a call for it; when the window closes the inbox sends them over the
account's one client connection (`answer_gates`, as `vicar answer g-1,g-2`), eight in
flight. A tap on the list is held the same way: its POST is one describe of the gate and
the file written; the list it returns to leaves the held gate out.
"""


async def _until_up(port: int) -> None:
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"the inbox did not listen on {port}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    asyncio.run(main())
