"""The record store's errors, each one line for the user (exit code 6), and the test
that tells a full disk from damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vicar.memory.diskfull import MIN_FREE, disk_full, free_bytes, is_disk_full
from vicar.memory.errors import StoreError

__all__ = ["RecordsUnusable", "StoreError", "raise_if_disk_full", "records_unusable"]


class RecordsUnusable(StoreError):
    """The record store cannot be read; the records are the source of truth."""


def records_unusable(path: Path, exc: BaseException | str) -> StoreError:
    """The one line for a record store that cannot be read. The records are the source
    of truth: nothing else holds them, so the only way back is a copy of the file."""
    return RecordsUnusable(
        f"record store {path} is unusable ({exc}); it cannot be rebuilt from the vectors: "
        f"move it aside and restore a backup copy of it"
    )


def raise_if_disk_full(path: Path, exc: BaseException) -> None:

    if isinstance(exc, StoreError):
        return
    # SQLite says "disk I/O error" when the -shm file cannot grow: on a disk with no room
    # left that is the full disk, not damage.
    io_on_full = (
        isinstance(exc, sqlite3.OperationalError)
        and "disk I/O error" in str(exc)
        and (free_bytes(path.parent) or 0) < MIN_FREE
    )
    if is_disk_full(exc) or io_on_full:
        raise disk_full(path, exc) from exc
