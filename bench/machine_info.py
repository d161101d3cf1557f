"""What machine a benchmark ran on, and the command that ran it (shared by the bench scripts)."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path


def machine_line(*extras: str) -> str:
    """'nproc N (CPU model), OS, Python x.y.z' plus any extra version strings."""
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    parts = [
        f"nproc {len(os.sched_getaffinity(0))} ({cpu})",
        f"{platform.system()} {platform.release()}",
        f"Python {platform.python_version()}",
        *extras,
    ]
    return ", ".join(parts)


def command_line() -> str:
    """The command that ran this process, as a report quotes it: `python -m bench.<name> ...`
    for a bench run as a module (how benches run), else `python <argv...>`."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None:
        return shlex.join(["python", "-m", spec.name, *sys.argv[1:]])
    return shlex.join(["python", *sys.argv])
