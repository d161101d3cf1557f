"""A broken store fails its activity at once, with one line, instead of being retried.

A corrupt memory.db or chroma/ does not heal by itself: retrying it for ever held the
principal's gates `queued` for ever (and a local activity that never finishes keeps
the worker from shutting down). Such errors become non-retryable ApplicationErrors of
type StoreUnavailable; the workflows turn them into an escalation with the reason and
try again later. Transient ones (a locked or busy file, a memory still held by a
process that is shutting down) stay retryable, within the caller's bounded policy.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from temporalio.exceptions import ApplicationError

from vicar.errors import STORE_UNAVAILABLE
from vicar.memory.diskfull import DiskFull, disk_full, is_disk_full
from vicar.memory.owner import StoreLocked
from vicar.memory.store import StoreError


def _broken(exc: BaseException) -> bool:
    if isinstance(exc, DiskFull):
        return True  # not damage, but no retry makes room: the workflow waits and tries later
    if isinstance(exc, sqlite3.OperationalError):
        return False  # "database is locked", "disk I/O error": may pass
    if isinstance(exc, (StoreError, sqlite3.DatabaseError)):
        return not isinstance(exc, StoreLocked)
    module = type(exc).__module__ or ""
    if module.startswith("chromadb"):
        from chromadb.errors import ChromaError  # loaded already if Chroma raised it

        return isinstance(exc, ChromaError)
    return False


def unavailable(exc: BaseException) -> ApplicationError:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
    return ApplicationError(f"memory unavailable: {text}", type=STORE_UNAVAILABLE, non_retryable=_broken(exc))


def store_errors(fn):
    """Wrap a synchronous activity that touches a principal's memory."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if is_disk_full(exc) and not isinstance(exc, DiskFull):
                # Written outside the store (the side files beside it): say so, with the file.
                where = getattr(exc, "filename", None)
                raise unavailable(disk_full(Path(where) if where else None, exc)) from exc
            if _broken(exc) or isinstance(exc, StoreLocked):
                raise unavailable(exc) from exc
            raise

    return wrapper
