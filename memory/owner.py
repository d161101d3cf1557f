"""One process per principal memory.

Each process keeps its own in-memory index of a principal's memory, updated on its own
writes only: two processes writing the same memory would each stop seeing the other's
writes. An exclusive advisory lock on `owner.lock` in the principal's directory, held
for as long as the memory is open, turns that silent divergence into a refusal that
names the holder. flock is released by the kernel when the holder dies, so a crash
never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from vicar.memory.errors import Conflict
from vicar.memory.store import StoreError

LOCK_FILE = "owner.lock"
_CMD_CHARS = 300


class StoreLocked(StoreError):
    """The memory is open in another process (or another time in this one)."""

    exit_code = Conflict.exit_code


class OwnerLock:
    def __init__(self, directory: Path, principal: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / LOCK_FILE
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(self.path)
            os.close(self._fd)
            self._fd = None
            raise StoreLocked(
                f"memory of {principal!r} is in use by {describe(holder)}; stop that process first (lock: {self.path})"
            ) from None
        me = {"pid": os.getpid(), "host": socket.gethostname(), "cmd": " ".join(sys.argv)[:_CMD_CHARS]}
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(me).encode(), 0)
        except BaseException:
            # A full disk: the lock must not stay held by a descriptor nobody will close
            # (every later open in this process was refused as "in use by another process").
            self.release()
            raise

    def release(self) -> None:
        if self._fd is not None:
            # Closing the descriptor drops the lock; the file stays (its content is stale,
            # harmless: only a held lock counts).
            os.close(self._fd)
            self._fd = None


def read_holder(path: Path) -> dict:
    try:
        holder = json.loads(path.read_text()[:4096] or "{}")
        return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
        return {}


def describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process (not yet identified)"
    return f"pid {holder['pid']} on {holder.get('host', '?')} ({holder.get('cmd') or '?'})"


def holder_of(directory: Path) -> dict | None:
    """Who holds the principal's memory now, or None if nobody does (a probe: takes
    and drops the lock at once)."""
    path = directory / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_holder(path)
    finally:
        os.close(fd)
    return None
