"""Moving a principal's memory directory between data directories in pieces: an
archive on the old side, pieces written at their offsets on the new side, and an
install that verifies before it replaces anything.

Every step is idempotent (a retried or resumed step redoes nothing it finished), and
the old copy is never touched here: its owner removes it after the new one is in use.

The old and new sides may be one directory (one worker serving both shards, or two
sharing a disk): the move's staging directory is then one too, which is how each side
tells. Install then leaves the memory where it is, and remove keeps it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tarfile
from pathlib import Path

from pydantic import BaseModel

PIECE_BYTES = 256 * 1024  # per activity payload (base64 in history): well under Temporal's 2 MB
ARCHIVE = "memory.tar.gz"
PART = "memory.part"
INSTALLED = "installed"


class Snapshot(BaseModel):
    """What the old owner archived: the new one checks it got exactly this."""

    size: int
    sha256: str
    pieces: int
    outcomes: int  # rows in the outcome log: the installed copy must have as many


class TransferError(Exception):
    """The received archive does not match the snapshot, or does not hold a sound memory."""


def _outcomes(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        if con.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            raise TransferError(f"{db}: integrity check failed")
        return int(con.execute("SELECT count(*) FROM outcomes").fetchone()[0])
    finally:
        con.close()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def snapshot(memory_dir: Path, staging: Path) -> Snapshot:
    """Archive a memory directory that nothing writes meanwhile (the caller holds the
    principal's turn and has closed it). The archive is kept in `staging`, so a resumed
    move reads the same bytes."""
    staging.mkdir(parents=True, exist_ok=True)
    archive = staging / ARCHIVE
    if not archive.exists():
        if not (memory_dir / "memory.db").exists():
            raise TransferError(f"no memory at {memory_dir}")
        tmp = staging / (ARCHIVE + ".tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(memory_dir, arcname=".")
        os.replace(tmp, archive)
    size = archive.stat().st_size
    return Snapshot(
        size=size,
        sha256=_sha256(archive),
        pieces=max(1, -(-size // PIECE_BYTES)),
        outcomes=_outcomes(memory_dir / "memory.db"),
    )


def read_piece(staging: Path, index: int) -> bytes:
    with open(staging / ARCHIVE, "rb") as f:
        f.seek(index * PIECE_BYTES)
        return f.read(PIECE_BYTES)


def write_piece(staging: Path, index: int, data: bytes) -> None:
    """At its offset: a piece written twice is written the same."""
    staging.mkdir(parents=True, exist_ok=True)
    part = staging / PART
    fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data, index * PIECE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)


def install(staging: Path, memory_dir: Path, expect: Snapshot) -> int:
    """Verify the received archive (size, hash), unpack it beside the target, check the
    SQLite file and its outcome count, then put it in place. Returns the outcome count.
    Done already (a resumed step): the installed copy is checked and kept."""
    marker = staging / INSTALLED
    if marker.exists() and (memory_dir / "memory.db").exists():
        return _outcomes(memory_dir / "memory.db")
    if (staging / ARCHIVE).exists():
        # The archive was made in this staging directory: the source is this very
        # directory, and its memory is the one to keep (replacing it by its own copy,
        # then removing "the old copy", deleted it).
        if not (memory_dir / "memory.db").exists():
            raise TransferError(f"no memory at {memory_dir}, where the archive was made")
        got = _outcomes(memory_dir / "memory.db")
        if got != expect.outcomes:
            raise TransferError(f"the memory has {got} outcomes, the snapshot {expect.outcomes}")
        marker.touch()
        return got
    part = staging / PART
    if not part.exists() or part.stat().st_size != expect.size or _sha256(part) != expect.sha256:
        raise TransferError("the received archive does not match the snapshot (size or sha256)")
    unpacked = staging / "unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(part, "r:gz") as tar:
        tar.extractall(unpacked, filter="data")  # no absolute paths, links out or devices
    got = _outcomes(unpacked / "memory.db")
    if got != expect.outcomes:
        raise TransferError(f"the received memory has {got} outcomes, the snapshot {expect.outcomes}")
    memory_dir.parent.mkdir(parents=True, exist_ok=True)
    if memory_dir.exists():  # a stale copy from an earlier stay on this shard
        shutil.rmtree(memory_dir)
    os.replace(unpacked, memory_dir)
    marker.touch()
    part.unlink()
    return got


def remove(memory_dir: Path, staging: Path) -> None:
    """The old copy goes only if its archive was made here and the new copy was
    installed at another path (no install marker beside the archive). The staging
    goes last, so a retried remove finds the same evidence."""
    if (staging / ARCHIVE).exists() and not (staging / INSTALLED).exists():
        shutil.rmtree(memory_dir, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
