"""Check and repair a principal's memory on disk.

The SQLite records are the source of truth; the Chroma vectors are derived from them.
So a vector store that is lost, partial or corrupt can always be rebuilt from the
records, while a corrupt record store cannot be rebuilt from anything here: only a
copy of the file brings it back.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from vicar.memory import readonly
from vicar.memory.diskfull import disk_full_problem
from vicar.memory.embedder import Embedder
from vicar.memory.names import child_path
from vicar.memory.owner import OwnerLock, describe, holder_of
from vicar.memory.params import MemoryParams
from vicar.memory.principal import PrincipalMemory
from vicar.memory.storage import UNINDEXED
from vicar.memory.store import MIGRATIONS, RecordStore, StoreError, records_unusable
from vicar.memory.vectors import VectorsUnusable, collection_name, vectors_unusable

_INTEGRITY_LINES = 5  # problems shown from PRAGMA integrity_check
_LOST_IDS_SHOWN = 10


class CheckReport(BaseModel):
    principal: str
    directory: str
    integrity: list[str] = Field(default_factory=list)  # ["ok"] when the SQLite file is sound
    schema_version: int | None = None
    schema_current: int = len(MIGRATIONS)
    records: int = 0
    records_by_dimension: dict[str, int] = Field(default_factory=dict)  # chunks that have each text
    vectors_by_dimension: dict[str, int] = Field(default_factory=dict)
    chunks_missing_vectors: int = 0
    orphan_vectors: int = 0
    lost_records: list[str] = Field(default_factory=list)  # chunk ids with vectors and no record
    disk_full: str | None = None  # the data's disk has no room left: the worker cannot record
    holder: dict | None = None  # the process that has the memory open, if any
    problems: list[str] = Field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems and not self.disk_full


def _memory_dir(root: Path, principal: str) -> Path:
    directory = child_path(root, principal)  # a directory linked outside the data dir is refused
    if not (directory / "memory.db").exists():
        raise StoreError(f"no memory for principal {principal!r} under {root}")
    return directory


def _integrity(db_path: Path) -> tuple[list[str], int | None]:
    """SQLite's own check, read-only: (["ok"] or the first problems, schema version)."""
    try:
        con = readonly.connect(db_path)
        try:
            lines = [r[0] for r in con.execute("PRAGMA integrity_check").fetchmany(_INTEGRITY_LINES)]
            return lines, con.execute("PRAGMA user_version").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)], None


def check(root: Path, principal: str, blended: bool = False) -> CheckReport:
    """Read-only: takes no lock and writes nothing (memory/readonly.py), so it runs beside
    the worker that holds the memory and on a read-only copy. `blended`: whether chunks
    must have a blended vector (MemoryParams.blended_vectors; off in the shipped
    configuration)."""
    directory = _memory_dir(root, principal)
    db_path = directory / "memory.db"
    report = CheckReport(
        principal=principal,
        directory=str(directory),
        holder=holder_of(directory),
        disk_full=disk_full_problem(directory),
    )
    report.integrity, report.schema_version = _integrity(db_path)
    if report.integrity != ["ok"]:
        report.problems.append(str(records_unusable(db_path, "; ".join(report.integrity))))
        return report
    if report.schema_version != report.schema_current:
        # Older: migrated when the worker opens it. Newer: written by a newer Vicar.
        report.problems.append(
            f"{db_path} has schema version {report.schema_version}, this Vicar uses {report.schema_current}"
        )
        return report

    store = RecordStore.reader(db_path, readonly.connect(db_path))
    try:
        model = store.get_meta("embedding_model") or ""
        chunks = store.chunks()
    finally:
        store.close()
    # Reinforced and dropped chunks keep their record only (memory/storage.py).
    expected: dict[str, set[str]] = {c.id: set(c.vector_texts(blended)) for c in chunks if c.status not in UNINDEXED}
    report.records = len(chunks)
    report.records_by_dimension = dict(Counter(d for dims in expected.values() for d in dims))
    present: dict[str, set[str]] = {}
    try:
        for vid, cid in readonly.vector_ids(directory / "chroma" / "chroma.sqlite3", collection_name(model)):
            present.setdefault(cid, set()).add(vid.rsplit(":", 1)[-1])
    except sqlite3.DatabaseError as exc:
        report.problems.append(str(vectors_unusable(directory, principal, exc)))
        return report
    report.vectors_by_dimension = dict(Counter(d for dims in present.values() for d in dims))
    report.chunks_missing_vectors = sum(1 for cid, dims in expected.items() if not dims <= present.get(cid, set()))
    # Vectors of chunks with no record at all (not of reinforced or dropped chunks, whose
    # records stay): the record is gone. A record is written after its vectors and a
    # confirmed one is on the disk, so these are answers lost with memory.db's last
    # writes (a power loss before durable commits, an older copy put back), or one gate
    # whose worker died mid-write (its retry records it).
    known = {c.id for c in chunks}
    report.lost_records = sorted(cid for cid in present if cid not in known)
    report.orphan_vectors = sum(len(present[cid]) for cid in report.lost_records)
    if report.chunks_missing_vectors:
        report.problems.append(
            f"{report.chunks_missing_vectors} of {report.records} chunks lack vectors "
            f"(rebuilt by `vicar memory repair {principal}`)"
        )
    if report.lost_records:
        report.problems.append(lost_records_problem(principal, report.lost_records))
    return report


def lost_records_problem(principal: str, lost: list[str]) -> str:
    shown = ", ".join(lost[:_LOST_IDS_SHOWN]) + (
        f" and {len(lost) - _LOST_IDS_SHOWN} more" if len(lost) > _LOST_IDS_SHOWN else ""
    )
    return (
        f"LOST RECORDS: {len(lost)} chunk(s) have vectors but no record in memory.db: {shown}. "
        f"Their answers are not in this memory and the vectors hold no text. To keep them: put back a "
        f"memory.db that has them (`vicar memory restore` from a backup taken after they were answered), "
        f"or answer those gates again; `vicar memory repair {principal}` keeps these vectors, "
        f"the only trace of which gates they were (chunk id = hash of principal and gate workflow id)"
    )


class RepairReport(BaseModel):
    principal: str
    chunks: int
    rebuilt: int  # chunks whose vectors were re-embedded
    lost_records: list[str] = Field(default_factory=list)  # chunks with vectors, no record: kept
    moved_aside: str | None = None  # where the unreadable vector store went


def repair(root: Path, principal: str, embedder: Embedder, params: MemoryParams | None = None) -> RepairReport:
    """Rebuild the vectors from the records. Takes the memory's lock: refused while a
    worker has the memory open (that worker rebuilds lost vectors itself on open)."""
    directory = _memory_dir(root, principal)
    params = params or MemoryParams()
    db_path = directory / "memory.db"
    integrity, _ = _integrity(db_path)
    if integrity != ["ok"]:
        raise records_unusable(db_path, "; ".join(integrity))
    moved = None
    try:
        mem = PrincipalMemory(principal, root, embedder, params)
    except VectorsUnusable:
        moved = _move_vectors_aside(directory, principal)
        mem = PrincipalMemory(principal, root, embedder, params)
    try:
        on_open = mem.rebuilt_on_open
        rest = mem.reconcile()  # chunks missing only some vectors; lost records named, kept
        return RepairReport(
            principal=principal,
            chunks=len(mem.index),
            rebuilt=(on_open.missing_vectors if on_open else 0) + rest.missing_vectors,
            lost_records=rest.lost_records,
            moved_aside=str(moved) if moved else None,
        )
    finally:
        mem.close()


def _move_vectors_aside(directory: Path, principal: str) -> Path:
    lock = OwnerLock(directory, principal)  # nobody may have it open while it moves
    try:
        target = directory / f"chroma.broken-{time.strftime('%Y%m%dT%H%M%S')}"
        (directory / "chroma").rename(target)
        return target
    finally:
        lock.release()


def summary(report: CheckReport) -> str:
    """One line: healthy or the first problem, then the counts. A full disk is no damage:
    said as DISK FULL, and BROKEN only beside a real problem."""
    r = report
    held = f"; open in {describe(r.holder)}" if r.holder else ""
    if r.problems:
        more = len(r.problems) - 1 + bool(r.disk_full)
        more_text = f" (+{more} more)" if more else ""
        label = "LOST RECORDS" if r.problems[0].startswith("LOST RECORDS") else "BROKEN"
        text = r.problems[0].removeprefix("LOST RECORDS: ")
        return f"{r.principal}: {label}: {text}{more_text}{held}"
    if r.disk_full:
        return f"{r.principal}: DISK FULL: {r.disk_full}; records intact ({r.records} records){held}"
    return (
        f"{r.principal}: healthy: integrity ok, schema v{r.schema_version}, {r.records} records, "
        f"{sum(r.vectors_by_dimension.values())} vectors, none missing, no orphans{held}"
    )
