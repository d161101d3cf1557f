"""Who uses a data directory, by advisory file locks (`fcntl.flock`).

The kernel drops a flock when its holder dies, even by SIGKILL, so no lock outlives
its process and nothing needs cleaning up after a crash. Waits poll instead of
blocking, so a wait has a deadline and Ctrl-C interrupts it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO
from urllib.parse import quote

from vicar.errors import DataDirBusy, VicarError

POLL_SECONDS = 0.1


def try_lock(f: IO, mode: int) -> bool:
    try:
        fcntl.flock(f, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_within(f: IO, mode: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not try_lock(f, mode):
        if time.monotonic() > deadline:
            raise VicarError(f"{what}: still locked after {timeout:.0f} s ({f.name})")
        time.sleep(POLL_SECONDS)


def held(path: Path) -> bool:
    """True while some process holds an exclusive lock on `path`."""
    try:
        with open(path, "a") as f:
            return not try_lock(f, fcntl.LOCK_SH)
    except OSError:
        return False


def worker_lock_file(data_dir: Path, task_queue: str) -> Path:
    # quote() keeps distinct queue names distinct file names (a task queue may hold '/').
    return data_dir / "workers" / f"{quote(task_queue, safe='')[:200]}.lock"


class WorkerLock:
    """One worker per data directory and task queue: the memory index lives in the
    worker's process, so a second worker on the same data would not see the first's
    writes. Held from construction to `release()` (or the process's end)."""

    def __init__(self, data_dir: Path, task_queue: str, command: str) -> None:
        path = worker_lock_file(data_dir, task_queue)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO | None = open(path, "a+")  # not "w": that would wipe the holder's note
        if not try_lock(self._file, fcntl.LOCK_EX):
            self._file.close()
            raise DataDirBusy(
                f"data directory {data_dir} is already served on task queue {task_queue!r} by "
                f"{_holder(path)}; one worker per data directory and task queue"
            )
        self._file.truncate(0)
        self._file.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "command": command,
                    "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                }
            )
        )
        self._file.flush()

    def release(self) -> None:
        f, self._file = self._file, None
        if f:
            f.truncate(0)
            f.close()

    def __enter__(self) -> "WorkerLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(path: Path) -> str:
    # The holder writes its note just after locking: a reader can come in between.
    for _ in range(10):
        try:
            note = json.loads(path.read_text()[:1000])
            return f"pid {note['pid']} ({note['command']}) on {note['host']} since {note['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(POLL_SECONDS)
    return "another process"
