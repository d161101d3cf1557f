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

from vicar.memory.embedder import Embedder
from vicar.memory.owner import OwnerLock, describe, holder_of
from vicar.memory.principal import PrincipalMemory
from vicar.memory.store import MIGRATIONS, RecordStore, StoreError, records_unusable
from vicar.memory.storage import UNINDEXED
from vicar.memory.vectors import VectorStore, VectorsUnusable, vectors_unusable
from vicar.memory.params import MemoryParams
from vicar.memory.names import check_principal

_INTEGRITY_LINES = 5  # problems shown from PRAGMA integrity_check


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
    holder: dict | None = None  # the process that has the memory open, if any
    problems: list[str] = Field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems


def _memory_dir(root: Path, principal: str) -> Path:
    check_principal(principal)
    directory = root / principal
    if not (directory / "memory.db").exists():
        raise StoreError(f"no memory for principal {principal!r} under {root}")
    return directory


def _integrity(db_path: Path) -> tuple[list[str], int | None]:
    """SQLite's own check, read-only: (["ok"] or the first problems, schema version)."""
    try:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            lines = [r[0] for r in con.execute("PRAGMA integrity_check").fetchmany(_INTEGRITY_LINES)]
            return lines, con.execute("PRAGMA user_version").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)], None


def check(root: Path, principal: str, blended: bool = False) -> CheckReport:
    """Read-only: takes no lock, so it runs beside the worker that holds the memory.
    `blended`: whether chunks must have a blended vector (MemoryParams.blended_vectors;
    off in the shipped configuration)."""
    directory = _memory_dir(root, principal)
    db_path = directory / "memory.db"
    report = CheckReport(principal=principal, directory=str(directory), holder=holder_of(directory))
    report.integrity, report.schema_version = _integrity(db_path)
    if report.integrity != ["ok"]:
        report.problems.append(str(records_unusable(db_path, "; ".join(report.integrity))))
        return report
    if report.schema_version != report.schema_current:
        # Older: migrated when the worker opens it. Newer: written by a newer Vicar.
        report.problems.append(f"{db_path} has schema version {report.schema_version}, "
                               f"this Vicar uses {report.schema_current}")
        return report

    store = RecordStore(db_path)
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
    if (directory / "chroma").exists():
        try:
            vectors = VectorStore(directory / "chroma", model)
            try:
                for vid, cid in vectors.ids():
                    present.setdefault(cid, set()).add(vid.rsplit(":", 1)[-1])
            finally:
                vectors.close()
        except Exception as exc:  # Chroma's errors have no common base
            report.problems.append(str(vectors_unusable(directory, principal, exc)))
            return report
    report.vectors_by_dimension = dict(Counter(d for dims in present.values() for d in dims))
    report.chunks_missing_vectors = sum(1 for cid, dims in expected.items() if not dims <= present.get(cid, set()))
    report.orphan_vectors = sum(len(dims) for cid, dims in present.items() if cid not in expected)
    if report.chunks_missing_vectors:
        report.problems.append(f"{report.chunks_missing_vectors} of {report.records} chunks lack vectors "
                               f"(rebuilt by `vicar memory repair {principal}`)")
    if report.orphan_vectors:
        report.problems.append(f"{report.orphan_vectors} vectors belong to no record "
                               f"(deleted by `vicar memory repair {principal}`)")
    return report


class RepairReport(BaseModel):
    principal: str
    chunks: int
    rebuilt: int  # chunks whose vectors were re-embedded
    orphans_deleted: int
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
        rest = mem.reconcile()  # chunks missing only some vectors, and orphans
        return RepairReport(
            principal=principal, chunks=len(mem.index),
            rebuilt=(on_open.missing_vectors if on_open else 0) + rest.missing_vectors,
            orphans_deleted=(on_open.orphan_vectors if on_open else 0) + rest.orphan_vectors,
            moved_aside=str(moved) if moved else None)
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
    """One line: healthy or the first problem, then the counts."""
    r = report
    held = f"; open in {describe(r.holder)}" if r.holder else ""
    if not r.healthy:
        more = f" (+{len(r.problems) - 1} more)" if len(r.problems) > 1 else ""
        return f"{r.principal}: BROKEN: {r.problems[0]}{more}{held}"
    return (f"{r.principal}: healthy: integrity ok, schema v{r.schema_version}, {r.records} records, "
            f"{sum(r.vectors_by_dimension.values())} vectors, none missing, no orphans{held}")

