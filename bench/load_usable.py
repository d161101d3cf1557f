"""Is every principal still usable after the worker was SIGKILLed and restarted under
load (issue 34)? One gate per principal through the last worker, and who holds each
memory's lock, by the kernel's account (/proc/locks)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

from bench.load_gates import Timing, drive
from tests.test_soak import retrying
from vicar import contracts as c
from vicar.models import GateDetails, GateRequest, GateResult, HumanAnswer


@dataclass
class Usability:
    probes: dict[str, GateResult] = field(default_factory=dict)  # principal -> its probe gate's result
    problems: list[str] = field(default_factory=list)  # each begins with the principal's name
    locks_held: int = 0  # principals' owner.lock held by the last worker

    def usable(self) -> int:
        return sum(1 for p in self.probes if not any(q.startswith(f"{p}:") for q in self.problems))


def flock_holders() -> dict[tuple[int, int], int]:
    """(device, inode) -> pid of every flock held on this machine, from /proc/locks."""
    held = {}
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 25006 fd:01:123456 0 EOF" (a blocked waiter's line has "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[2] != "->":
            major, minor, inode = parts[5].split(":")
            held[(os.makedev(int(major, 16), int(minor, 16)), int(inode))] = int(parts[4])
    return held


def probe_request(principal: str) -> tuple[GateRequest, HumanAnswer]:
    req = GateRequest(
        principal=principal,
        gate_id=f"probe-{principal}",
        state="PLAN_ASSERT",
        task_type="docs",
        question="Approve the docs plan?",
        artifact_text="docs change after the restarts",
        escalation_mode="always",
    )
    return req, HumanAnswer(action="approve", text="approve: probe", responder=principal)


async def check_usable(
    conns: list[Client], principals: list[str], principals_dir: Path, worker_pid: int, timeout: float
) -> Usability:
    """One gate per principal through the running worker: its consult must have read the
    memory (no proxy_error), and the worker must then hold every principal's lock."""
    out = Usability()

    async def probe(principal: str) -> None:
        req, answer = probe_request(principal)
        try:
            out.probes[principal] = await asyncio.wait_for(drive(conns, req, answer, 1, Timing()), timeout)
        except TimeoutError:
            out.problems.append(f"{principal}: the probe gate had no result within {timeout:.0f} s")
            return
        handle = conns[0].get_workflow_handle(c.gate_workflow_id(req.gate_id))
        details = await retrying(lambda: handle.query("details", result_type=GateDetails), f"details {req.gate_id}")
        if details.calibration_guard == "proxy_error":
            out.problems.append(f"{principal}: the probe's consult failed: {details.calibration_note[:200]}")

    await asyncio.gather(*(probe(p) for p in principals))
    held = flock_holders()
    for principal in principals:
        st = (principals_dir / principal / "owner.lock").stat()
        holder = held.get((st.st_dev, st.st_ino))
        if holder == worker_pid:
            out.locks_held += 1
        else:
            out.problems.append(f"{principal}: owner.lock held by {holder or 'nobody'}, not the worker")
    return out
