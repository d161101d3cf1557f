"""Load with concurrent duplicate answers and a worker SIGKILL (issue 24, "Done when").

    python -m bench.load_bench --gates 500 --principals 20 --out bench/LOAD_RESULTS.md
    python -m bench.load_bench --gates 2400 --principals 120 --in-flight 120 --kills 3 --out bench/LOAD_RESULTS.md

A Temporal dev server and one worker process (`python -m vicar.worker`) on loopback,
started and killed by tests/test_soak.py's Cluster. Every gate asks the human
(escalation_mode always); once it waits, the human's answer is sent several times at
once from several clients, by `respond` update and `human_response` signal, on the tick
of a shared one-second clock, so the gates waiting together are answered together. The worker
is SIGKILLed at the given points (completed gates) and restarted. Afterwards:

- every gate completed once with the intended answer, N gap-free per principal;
- the store holds each answer exactly once, and so do proxy-interactions.jsonl (one
  line per gate) and proxy-patterns.md (one section per gate), saying the same answer;
- `vicar memory check` finds every memory healthy.

With `--kills N` the worker is SIGKILLed N times, evenly through the load, and restarted
each time; then every principal must still be usable by the last worker (issue 34): one
more gate each, whose consult must read the memory (no `proxy_error`), every
`owner.lock` held by that worker (/proc/locks), and no worker of any run refusing a
memory as "in use" (the only process on the data directory: any such refusal is a lock
it held itself).

Figures: p50/p95 start -> escalated (the gate's escalated_at, workflow time, minus the
client's clock at the start call) and answer -> result (the workflow's close time minus
the first answer's send), and the worker's RSS (VmRSS, sampled every second), per run
of the worker. Gates caught by the kill count in the figures as they happened.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.service import RPCError

from bench.load_gates import Timing, drive, plan
from bench.load_usable import Usability, check_usable, probe_request
from bench.machine_info import command_line, machine_line
from tests.test_soak import Cluster
from vicar import contracts as c
from vicar.memory.check import check
from vicar.models import GateRequest, GateResult, HumanAnswer
from vicar.proxy.outcomes import side_file_gates
from vicar.runtime.connect import connect
from vicar.runtime.server import free_port
from vicar.settings import Settings


@dataclass
class LoadReport:
    gates: int
    principals: int
    kills: list[int]
    duplicates: int
    clients: int
    seconds: float = 0.0
    timings: dict[str, Timing] = field(default_factory=dict)
    results: dict[str, GateResult] = field(default_factory=dict)
    rss_mb: list[float] = field(default_factory=list)  # peak per worker run
    problems: list[str] = field(default_factory=list)
    stored: int = 0
    lines: int = 0
    sections: int = 0
    usability: Usability | None = None  # with --kills: every principal probed after the last restart
    refusals: list[int] = field(default_factory=list)  # "in use" refusals in each worker run's log
    misreports: list[int] = field(default_factory=list)  # "vector store ... unusable" in each run's log

    @property
    def to_escalated(self) -> list[float]:
        return [t.escalated_at - t.started for t in self.timings.values() if t.escalated_at]

    @property
    def to_result(self) -> list[float]:
        return [t.closed - t.answered for t in self.timings.values() if t.closed and t.answered]


def pct(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


class ReadyCluster(Cluster):
    """tests/test_soak.py's Cluster, whose worker also serves /readyz (vicar/runtime/ops.py), and
    whose start waits for it: the first gates' start -> escalated would otherwise time
    the worker's start-up, and a SIGTERM in its start-up is not a clean stop."""

    ops_address = f"127.0.0.1:{free_port()}"

    async def start_worker(self, timeout: float = 300.0) -> None:
        saved = os.environ.get("VICAR_OPS_ADDRESS")
        os.environ["VICAR_OPS_ADDRESS"] = self.ops_address  # Cluster passes its environment on
        try:
            await super().start_worker()
        finally:
            if saved is None:
                os.environ.pop("VICAR_OPS_ADDRESS")
            else:
                os.environ["VICAR_OPS_ADDRESS"] = saved
        assert self.worker is not None  # started above
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if self.worker.returncode is not None:
                    raise RuntimeError(f"the worker exited {self.worker.returncode}: see {self.logs[-1]}")
                try:
                    if (await http.get(f"http://{self.ops_address}/readyz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                await asyncio.sleep(0.2)
        raise TimeoutError(f"the worker was not ready within {timeout:.0f} s")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def stuck(client: Client, gate_ids: list[str]) -> list[str]:
    """Why each of these gates has no result: its workflow's state and last task failure."""
    out = []
    for gid in gate_ids:
        try:
            handle = client.get_workflow_handle(c.gate_workflow_id(gid))
            desc = await handle.describe()
            attempt = desc.raw_description.pending_workflow_task.attempt
            why = str(desc.status and desc.status.name)
            if attempt > 1:
                failure = ""
                async for event in handle.fetch_history_events():
                    if event.HasField("workflow_task_failed_event_attributes"):
                        failure = event.workflow_task_failed_event_attributes.failure.message
                why = f"its workflow task keeps failing (attempt {attempt}): {failure[:200]}"
        except RPCError as exc:
            why = f"not found ({exc})"
        out.append(f"{gid}: no result: {why}")
    return out


async def run_load(
    tmp: Path,
    gates: int,
    principals: int,
    kills: list[int],
    duplicates: int = 6,
    clients: int = 3,
    in_flight: int = 40,
    stall: float = 300.0,
    progress=None,
    usable: bool = False,
    probe_timeout: float = 300.0,
) -> LoadReport:
    """`stall`: seconds with no gate completing (and no kill pending) after which the run
    stops and reports the gates that have no result, with why. `usable`: then probe every
    principal through the last worker (check_usable)."""
    report = LoadReport(gates=gates, principals=principals, kills=kills, duplicates=duplicates, clients=clients)
    cluster = ReadyCluster(tmp)
    await cluster.start_server()
    # The worker first: only a worker makes the data directory's payload key (vicar.runtime.codec),
    # which the clients then read.
    await cluster.start_worker()
    settings = Settings(data_dir=cluster.data_dir)
    conns = [
        await connect(settings, target_host=cluster.address, namespace="default", timeout=60) for _ in range(clients)
    ]
    peaks: list[float] = [0.0]
    done: list[str] = []
    slots = asyncio.Semaphore(in_flight)
    began = time.monotonic()

    async def sample_rss() -> None:
        while True:
            if cluster.worker and cluster.worker.returncode is None and (mb := rss_mb(cluster.worker.pid)):
                peaks[-1] = max(peaks[-1], mb)
            await asyncio.sleep(1.0)

    async def one(i: int) -> None:
        req, answer = plan(i, principals)
        timing = report.timings.setdefault(req.gate_id, Timing())
        async with slots:
            report.results[req.gate_id] = await drive(conns, req, answer, duplicates, timing)
        done.append(req.gate_id)
        if progress:
            progress(len(done), gates)

    async def faults() -> None:
        for at in sorted(kills):
            while len(done) < at:
                await asyncio.sleep(0.1)
            await cluster.kill_worker()
            await asyncio.sleep(1.0)
            peaks.append(0.0)
            await cluster.start_worker()  # the gates' calls retry meanwhile

    sampler = asyncio.create_task(sample_rss())
    run = asyncio.ensure_future(asyncio.gather(faults(), *(one(i) for i in range(gates))))
    try:
        seen, last, stalled = -1, time.monotonic(), False
        while not run.done():
            await asyncio.wait([run], timeout=1.0)
            if len(done) != seen:
                seen, last = len(done), time.monotonic()
            elif time.monotonic() - last > stall:
                left = [plan(i, principals)[0].gate_id for i in range(gates)]
                report.problems += await stuck(conns[0], [g for g in left if g not in report.results])
                stalled = True
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run
        report.seconds = time.monotonic() - began
        if not stalled:
            run.result()
        if usable:
            assert cluster.worker is not None
            principals_of = sorted({plan(i, principals)[0].principal for i in range(gates)})
            report.usability = await check_usable(
                conns, principals_of, cluster.data_dir / "principals", cluster.worker.pid, probe_timeout
            )
        code = await cluster.stop_worker()
        if code != 0:
            report.problems.append(f"the worker exited {code} on SIGTERM")
    finally:
        if not run.done():
            run.cancel()
        sampler.cancel()
        if cluster.worker and cluster.worker.returncode is None:
            cluster.worker.kill()
            await cluster.worker.wait()
        await asyncio.to_thread(cluster.server.stop)
    report.rss_mb = peaks
    verify(report, cluster)
    return report


def verify(report: LoadReport, cluster: Cluster) -> None:
    """Every answer exactly once in the store and in both side files, nothing lost."""
    problems = report.problems
    by_principal: dict[str, list[tuple[GateRequest, HumanAnswer]]] = defaultdict(list)
    for i in range(report.gates):
        req, answer = plan(i, report.principals)
        by_principal[req.principal].append((req, answer))
        res = report.results.get(req.gate_id)
        if res is None:
            problems.append(f"{req.gate_id}: no result")
        elif (res.answered_by.value, res.action.value, res.responder) != ("human", answer.action, answer.responder):
            problems.append(f"{req.gate_id}: result {res.answered_by.value} {res.action.value} {res.responder}")
    probes = report.usability.probes if report.usability else {}
    problems += report.usability.problems if report.usability else []
    results = dict(report.results)
    for principal, res in probes.items():  # each probe is one more gate of its principal
        req, answer = probe_request(principal)
        by_principal[principal].append((req, answer))
        results[req.gate_id] = res
    for gid, t in report.timings.items():
        if t.accepted > 1:
            problems.append(f"{gid}: {t.accepted} answers accepted")
    for principal, gates in by_principal.items():
        d = cluster.data_dir / "principals" / principal
        want = {c.gate_workflow_id(r.gate_id): a.action for r, a in gates}
        ns = sorted(results[r.gate_id].n for r, _ in gates if r.gate_id in results)
        if ns != list(range(1, len(gates) + 1)):
            problems.append(f"{principal}: N not gap-free")
        db = sqlite3.connect(f"file:{d / 'memory.db'}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT workflow_id, action FROM outcomes").fetchall()
        finally:
            db.close()
        report.stored += len(rows)
        if len(rows) != len({w for w, _ in rows}) or dict(rows) != want:
            problems.append(f"{principal}: store holds {len(rows)} outcomes for {len(want)} gates")
        lines, sections = side_file_gates(d)
        report.lines += sum(lines.values())
        report.sections += sum(sections.values())
        gate_ids = Counter(r.gate_id for r, _ in gates)
        for name, counts in (("proxy-interactions.jsonl", lines), ("proxy-patterns.md", sections)):
            if counts != gate_ids:
                wrong = {g: counts[g] for g in sorted(set(counts) | set(gate_ids)) if counts[g] != gate_ids[g]}
                problems.append(
                    f"{principal}: {name}: {len(wrong)} gates not once (times written: {dict(list(wrong.items())[:5])})"
                )
        written = {}
        for x in (d / "proxy-interactions.jsonl").read_text().splitlines():
            if x.strip():
                entry = json.loads(x)
                written[entry["workflow_id"]] = entry["action"]
        if written != want:
            problems.append(f"{principal}: proxy-interactions.jsonl says other answers than the store")
        health = check(cluster.data_dir / "principals", principal)
        if not health.healthy:
            problems.append(f"{principal}: memory check: {health.problems[:3]}")
    for log in cluster.logs:
        text = log.read_text(errors="replace")
        if "Traceback" in text:
            problems.append(f"{log.name}: a traceback")
        # One worker at a time on the data directory, the killed one gone before the next
        # starts: whoever held a refused lock was the refusing worker itself.
        # Counted per log line (one failed attempt), which names the refusal twice (its chain).
        log_lines = text.splitlines()
        report.refusals.append(sum(1 for line in log_lines if "is in use by" in line))
        if report.refusals[-1]:
            problems.append(f"{log.name}: {report.refusals[-1]} refusals of a memory as in use by its own holder")
        # Nothing here damages a vector store: any "unusable" is an interrupted open misreported.
        unusable = re.compile(r"vector store \S+ of '[^']+' is unusable")
        report.misreports.append(sum(1 for line in log_lines if unusable.search(line)))
        if report.misreports[-1]:
            problems.append(f"{log.name}: {report.misreports[-1]} vector stores reported unusable")


def markdown(report: LoadReport, command: str) -> str:
    e50, e95, emax = (
        x * 1000
        for x in (
            pct(report.to_escalated, 50),
            pct(report.to_escalated, 95),
            max(report.to_escalated, default=float("nan")),
        )
    )
    r50, r95, rmax = (
        x * 1000
        for x in (pct(report.to_result, 50), pct(report.to_result, 95), max(report.to_result, default=float("nan")))
    )
    verdict = "all checks passed" if not report.problems else f"{len(report.problems)} PROBLEMS"
    out = [
        f"## Load: {report.gates} gates, {report.principals} principals, {len(report.kills)} worker SIGKILL "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"    {command}",
        "",
        f"Machine: {machine_line()}; predictor {os.environ.get('VICAR_PREDICTOR') or 'the default'}.",
        f"Each answer sent {report.duplicates} times at once (updates and signals in turn) from "
        f"{report.clients} clients; worker SIGKILLed after {', '.join(map(str, report.kills)) or 'no'} completed "
        f"gates and restarted 1 s later. Wall time {report.seconds:.0f} s "
        f"({report.gates / report.seconds:.1f} gates/s).",
        "",
        "| figure | p50 | p95 | max |",
        "|---|---|---|---|",
        f"| start → escalated | {e50:.0f} ms | {e95:.0f} ms | {emax:.0f} ms |",
        f"| answer → result | {r50:.0f} ms | {r95:.0f} ms | {rmax:.0f} ms |",
        "",
        "Worker peak RSS per run (killed run first): " + ", ".join(f"{mb:.0f} MB" for mb in report.rss_mb) + ".",
        "",
        f"Exactly once: {report.stored} outcomes in the stores, {report.lines} lines in proxy-interactions.jsonl, "
        f"{report.sections} sections in proxy-patterns.md, for {report.gates} gates"
        + (f" and {len(report.usability.probes)} probe gates" if report.usability else "")
        + f": {verdict}.",
    ]
    if report.usability:
        out += [
            "",
            f"Usable after {len(report.kills)} SIGKILLs and restarts: {report.usability.usable()} of "
            f"{report.principals} principals (a probe gate each through the last worker, its consult reading the "
            f"memory); {report.usability.locks_held} of "
            f"{report.principals} owner locks held by that worker (/proc/locks); refusals of a memory as in use by "
            f"the worker holding its lock (failed attempts), per worker run: {', '.join(map(str, report.refusals))}; "
            f"vector stores reported unusable (none is damaged here), per run: "
            f"{', '.join(map(str, report.misreports))}.",
        ]
    out += [f"- {p}" for p in report.problems[:20]]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=500)
    ap.add_argument("--principals", type=int, default=20)
    ap.add_argument(
        "--kill-at",
        type=int,
        action="append",
        help="completed gates before a worker SIGKILL (repeatable; default: half of --gates)",
    )
    ap.add_argument(
        "--kills",
        type=int,
        help="SIGKILL and restart the worker this many times, evenly through the load, then check every "
        "principal is usable by the last worker (instead of --kill-at)",
    )
    ap.add_argument("--duplicates", type=int, default=6, help="times each answer is sent at once")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--in-flight", type=int, default=40, help="gates open at once")
    ap.add_argument(
        "--stall",
        type=float,
        default=300.0,
        help="seconds with no gate completing before the run stops and reports the gates left",
    )
    ap.add_argument("--out", type=Path, help="append the report (markdown) to this file")
    args = ap.parse_args()
    if args.kills is not None:
        kills = [args.gates * k // (args.kills + 1) for k in range(1, args.kills + 1)]
    else:
        kills = args.kill_at if args.kill_at is not None else [args.gates // 2]
    command = command_line()

    def progress(n: int, total: int) -> None:
        if n % 50 == 0 or n == total:
            print(f"{n}/{total} gates", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="vicar-load-") as tmp:
        report = asyncio.run(
            run_load(
                Path(tmp),
                args.gates,
                args.principals,
                kills,
                args.duplicates,
                args.clients,
                args.in_flight,
                args.stall,
                progress=progress,
                usable=args.kills is not None,
            )
        )
    text = markdown(report, command)
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            f.write("\n" + text)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
