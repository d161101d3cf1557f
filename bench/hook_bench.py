"""How long Claude Code waits for Vicar's answer to a permission hook, end to end, when the
proxy answers alone (issue 38's budget: 300 ms at the median).

    python -m bench.hook_bench [--calls 30] [--out bench/HOOK_RESULTS.md]

Everything runs as it is deployed, in its own process on loopback: `vicar worker` (the
embedded Temporal server and the learned predictor; the autonomy rule loosened as in
bench/gate_bench.py, BENCH_ENV, so the proxy earns autonomy within a few answers) and
`vicar inbox` (the hook endpoint). A scripted person first answers `approve` to the
escalated gates of `npm test` calls made through the hook, until the proxy answers one
alone. Then each form Claude Code can use is timed, the clock running from the hook's
start (the process spawned, or the HTTP request sent) to its JSON answer, over --calls
calls each, counting only the calls the proxy answered alone:

  - command, thin: `python -m vicar.hooks claude-code --url ... --token-file ...`
  - HTTP: the input POSTed to /hooks/claude-code on a new connection (Claude Code's http hook)
  - command, full CLI: `vicar hook claude-code --url ...` (the same client, the whole CLI imported)
  - command, direct: `vicar hook claude-code` opening the gate on Temporal itself (no inbox)

and, for what the forms add to the gate: the gate alone, the same call answered in this
process (vicar.hooks.decide.answer_call, as the endpoint calls it: no hook process, no
HTTP), the thin command's start alone (refusing empty input) and `python -c pass`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench.gate_common import BENCH_ENV
from bench.machine_info import command_line, machine_line
from vicar.client import answer
from vicar.client.gates import gate_details
from vicar.errors import Conflict, NotFound
from vicar.hooks.decide import answer_call
from vicar.hooks.http import hook_token
from vicar.hooks.tool_call import gate_id_for
from vicar.runtime.connect import connect
from vicar.runtime.server import free_port
from vicar.settings import Settings
from vicar.settings.hook import HookParams

ROOT = Path(__file__).resolve().parents[1]
MAX_TRAINING = 40
BUDGET_MS = 300.0


@dataclass
class Series:
    name: str
    ms: list[float] = field(default_factory=list)
    other: int = 0  # calls not answered by the proxy alone (left out of the figures)

    def pct(self, q: float) -> float:
        s = sorted(self.ms)
        return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else float("nan")


def hook_input(session: str) -> dict:
    return {
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": str(ROOT),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "npm test", "description": "Run test suite"},
        "tool_use_id": f"toolu_{uuid.uuid4().hex[:24]}",
    }


async def run_command(argv: list[str], data: dict | None, env: dict) -> tuple[float, dict, int]:
    """(ms from spawn to exit, the JSON answer, exit code)."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    out, _ = await proc.communicate(json.dumps(data).encode() if data is not None else b"")
    ms = (time.perf_counter() - start) * 1000
    return ms, json.loads(out) if out.strip().startswith(b"{") else {}, proc.returncode or 0


def post(url: str, token: str, data: dict) -> tuple[float, dict]:
    body = json.dumps(data).encode()
    start = time.perf_counter()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        answer_ = json.loads(reply.read())
    return (time.perf_counter() - start) * 1000, answer_


def by_proxy(body: dict) -> bool:
    out = body.get("hookSpecificOutput") or {}
    return out.get("permissionDecision") == "allow" and "proxy" in out.get("permissionDecisionReason", "")


async def person(client, principal: str, pending: set[str], stop: asyncio.Event) -> None:
    """The scripted person: approves every hook gate that waits for them, after a beat."""
    while not stop.is_set():
        for gate_id in list(pending):
            try:
                d = await gate_details(client, gate_id)
            except NotFound:
                continue
            if d is None or d.status.value in ("queued", "consulting"):
                continue
            pending.discard(gate_id)
            if d.status.value == "escalated":
                try:
                    await answer(client, gate_id, dict(action="approve", text="fine", responder=principal))
                except Conflict:
                    pass
        await asyncio.sleep(0.2)


async def wait_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise TimeoutError(f"nothing listens on {port}")


async def main(calls: int, out: Path) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="hook-bench-"))
    principal = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VICAR_", "TEMPORAL_"))
    }  # this bench's own deployment
    env.update(BENCH_ENV, VICAR_DATA_DIR=str(data_dir), VICAR_HOOK_PRINCIPAL=principal)
    env.update(VICAR_HOOK_WAIT_SECONDS="30", VICAR_INBOX_URL=f"http://127.0.0.1:{port}")
    os.environ.update(VICAR_DATA_DIR=str(data_dir))
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vicar.cli", "worker", env=env, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL
    )
    inbox = None
    stop = asyncio.Event()
    try:
        address = data_dir / "temporal" / "address"
        while not address.exists():
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # the worker registers its search attributes and keys
        inbox = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vicar.cli", "inbox", "--port", str(port), env=env, cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await wait_port(port)
        settings = Settings(data_dir=data_dir)
        token, token_file = hook_token(settings)
        url = f"http://127.0.0.1:{port}/hooks/claude-code"
        client = await connect(settings)
        pending: set[str] = set()
        asyncio.ensure_future(person(client, principal, pending, stop))
        thin = [sys.executable, "-m", "vicar.hooks", "claude-code", "--url", url, "--token-file", str(token_file)]
        full = [sys.executable, "-m", "vicar.cli", "hook", "claude-code", "--url", url, "--token-file", str(token_file)]
        direct = [sys.executable, "-m", "vicar.cli", "hook", "claude-code"]

        in_process = settings.model_copy(update={"hook": HookParams(principal=principal, wait_seconds=30)})

        async def one(argv: list[str] | str | None) -> tuple[float, dict]:
            data = hook_input(f"s-{uuid.uuid4().hex[:8]}")
            pending.add(gate_id_for(data["session_id"], data["tool_use_id"]))
            if argv is None:
                return await asyncio.to_thread(post, url, token, data)
            if isinstance(argv, str):  # the gate alone, in this process
                start = time.perf_counter()
                answered = await answer_call(client, in_process, data)
                return (time.perf_counter() - start) * 1000, answered.body
            ms, body, _ = await run_command(argv, data, env)
            return ms, body

        trained = 0
        while trained < MAX_TRAINING:
            trained += 1
            _, body = await one(thin)
            if by_proxy(body):
                break
        print(f"the proxy answered alone after {trained} hook calls", flush=True)
        series = [
            Series("command, thin: python -m vicar.hooks claude-code --url"),
            Series("HTTP hook: POST /hooks/claude-code"),
            Series("command, full CLI: vicar hook claude-code --url"),
            Series("command, direct: vicar hook claude-code (Temporal, no inbox)"),
            Series("the gate alone: answer_call in the bench's process (no hook process, no HTTP)"),
        ]
        forms: list[list[str] | str | None] = [thin, None, full, direct, "in-process"]
        for _ in range(calls):  # interleaved, so load on the machine falls on every form alike
            for s, argv in zip(series, forms):
                ms, body = await one(argv)
                if by_proxy(body):
                    s.ms.append(ms)
                else:
                    s.other += 1
        start_only, bare = Series("thin command's start alone (empty input refused)"), Series("python -c pass")
        for _ in range(calls):
            start_only.ms.append((await run_command(thin, None, env))[0])
            bare.ms.append((await run_command([sys.executable, "-c", "pass"], None, env))[0])
        write(out, calls, trained, [*series, start_only, bare])
    finally:
        stop.set()
        for proc in (inbox, worker):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                await proc.wait()


def write(out: Path, calls: int, trained: int, series: list[Series]) -> None:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# The hook's latency (issue 38)",
        "",
        f"Made by `{command_line()}` on {machine_line()}; load average at the end {load} "
        "(the machine is shared with other work).",
        "",
        "Each row: from the hook's start (the process spawned, or the request sent) to its JSON answer, "
        f"over {calls} calls per form, interleaved; only the calls the proxy answered alone "
        f"(`allow`, by the proxy) count. The proxy answered alone after {trained} hook calls the "
        "scripted person approved. Budget: 300 ms at the median.",
        "",
        "| form | calls counted | p50 ms | p90 ms | mean ms | within 300 ms at p50 |",
        "|---|---|---|---|---|---|",
    ]
    for s in series:
        ok = "yes" if s.pct(0.5) <= BUDGET_MS else "no"
        mean = statistics.fmean(s.ms) if s.ms else float("nan")
        counted = f"{len(s.ms)}" + (f" ({s.other} not by the proxy)" if s.other else "")
        lines.append(f"| {s.name} | {counted} | {s.pct(0.5):.0f} | {s.pct(0.9):.0f} | {mean:.0f} | {ok} |")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "HOOK_RESULTS.md")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.out))
