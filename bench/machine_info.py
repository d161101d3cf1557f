"""What machine a benchmark ran on (shared by the bench scripts)."""

from __future__ import annotations

import os
import platform
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
