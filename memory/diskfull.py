"""A full disk, said as such. Under ENOSPC / SQLITE_FULL a new principal was told its
memory "is in use by another process" (the lock file's write failed and kept the lock),
and `vicar memory check` called the memory BROKEN and suggested a repair: nothing is
damaged, there is no room to write. Every such failure becomes DiskFull, naming the path
and the free space, so the operator frees space instead of repairing."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from vicar.memory.errors import StoreError

_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_SQLITE_FULL = 13
# Below this many bytes free the worker cannot record an answer (a commit writes a few
# pages to the WAL, Chroma's upsert more): a check reports the disk as full.
MIN_FREE = 1 << 20


class DiskFull(StoreError):
    """No room on the disk that holds a principal's memory; nothing is damaged."""

    exit_code = 15


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether this error, or one it was raised from, is a full disk or quota."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in _ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error) and (
            getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or "database or disk is full" in str(exc)
        ):
            return True
        text = str(exc)
        if type(exc).__module__.startswith("chromadb") and ("disk is full" in text or "No space left" in text):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding `path`."""
    for p in (path, *path.parents):
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


def disk_full(path: Path | None, exc: BaseException | None = None) -> DiskFull:
    """`path`: what could not be written (None when the error does not say)."""
    free = free_bytes(path) if path is not None else None
    room = f"{free} bytes free" if free is not None else "free space unknown"
    cause = f": {str(exc).strip().splitlines()[0][:200]}" if exc is not None and str(exc).strip() else ""
    what = f"cannot write {path}" if path is not None else "a write failed"
    return DiskFull(
        f"the disk is full: {what} ({room}{cause}); nothing is damaged, free space on that "
        f"filesystem and the memory works again (no repair needed)"
    )


def disk_full_problem(directory: Path) -> str | None:
    """A check's finding when the memory's disk has no room left, else None."""
    free = free_bytes(directory)
    if free is None or free >= MIN_FREE:
        return None
    return (
        f"the disk is full: {directory} has {free} bytes free; the worker cannot record answers "
        f"until space is freed on that filesystem (nothing is damaged: no repair needed)"
    )
