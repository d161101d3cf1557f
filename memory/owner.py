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
        self._fd: int | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / LOCK_FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        # Everything from the lock to the note's write can fail, a cancellation raised into
        # the thread included: the descriptor, and with it the lock, must not outlive the
        # failure. A lock leaked so once made the worker refuse the principal as "in use" by
        # the note's pid (the process it replaced) while it held the lock itself.
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            me = {"pid": os.getpid(), "host": socket.gethostname(), "cmd": " ".join(sys.argv)[:_CMD_CHARS]}
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(me).encode(), 0)
        except BlockingIOError:  # only flock says so: another descriptor holds the lock
            self.release()
            raise StoreLocked(
                f"memory of {principal!r} is in use by {describe(read_holder(self.path))}; stop that process first "
                f"(lock: {self.path})"
            ) from None
        except BaseException:
            # A full disk, an interruption: a lock nobody will release is worse than no lock.
            self.release()
            raise

    def release(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            # Closing the descriptor drops the lock; the file stays (its content is stale,
            # harmless: only a held lock counts).
            os.close(fd)

    def __del__(self) -> None:
        # The last resort for a lock whose owner was dropped without release (an exception
        # between taking it and handing it over): the kernel lock goes with the descriptor.
        try:
            self.release()
        except Exception:
            pass  # a finalizer has nobody to tell; at exit the kernel closes it anyway


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
