"""Backup and restore of principals' memories (`vicar memory backup` / `restore`).

A principal's directory holds `memory.db` (the records: the source of truth), `chroma/`
(the vectors, derived from the records), `models/` (the learned predictor's versions,
refitted from the records when missing) and small files (responders.json,
autonomy.json, the proxy's logs).

- `memory.db` is copied with SQLite's online backup API: a consistent snapshot even
  while a worker writes to it (a file copy of a live WAL database can be torn).
- `chroma/` is copied only when no process has the memory open: the backup then holds
  the memory's lock, so no worker opens it meanwhile (a gate arriving then waits for
  its turn to be refused and goes to the human). Chroma has no online backup; its
  files copied under a live writer could be torn without any error. With the memory
  open in a worker, the backup has the records only, and restore rebuilds the vectors
  from them (the same path as `vicar memory repair`).
- Every other file is copied as is; `models/` versions are written by rename, so a
  copy holds whole ones.

A backup directory is `vicar-backup.json` (written last: a backup without it is
incomplete and refused) and `principals/<name>/`. One worker's data directory is one
shard's principals, so `--all` on a shard's worker backs up that shard.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator

from vicar.errors import BrokenStore, Conflict, InvalidInput, NotFound
from vicar.memory.names import PRINCIPAL_RE, check_principal, child_path
from vicar.memory.owner import OwnerLock, StoreLocked

MANIFEST = "vicar-backup.json"
FORMAT = 1
DB = "memory.db"
VECTORS = "chroma"
# Never copied: the live database and its journal (copied through the backup API), the
# lock, vectors (copied only when quiescent), vectors moved aside by a repair, and a
# learned model version still being written.
SKIP = (
    "memory.db",
    "memory.db-wal",
    "memory.db-shm",
    "memory.db-journal",
    "owner.lock",
    "chroma",
    "chroma.broken-*",
    ".v*.tmp",
)


class PrincipalBackup(BaseModel):
    principal: str
    chunks: int
    vectors: bool  # chroma/ is in the backup; False: restore rebuilds it from the records

    # A manifest is input like a command line: "." or ".." here once moved the whole
    # principals/ folder aside, or locked the data directory's root.
    _name = field_validator("principal")(check_principal)


class BackupManifest(BaseModel):
    format: int = FORMAT
    created_at: datetime
    source: str
    principals: list[PrincipalBackup]


class RestoreReport(BaseModel):
    principal: str
    chunks: int
    vectors_rebuilt: int
    replaced: str | None = None  # where the memory that was there went


def _sqlite_copy(src: Path, dst: Path) -> int:
    """A consistent copy through the online backup API; the copy's chunk count."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(dst)
        try:
            source.backup(target)  # all pages in one step: one snapshot
            if target.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                raise BrokenStore(f"the copy of {src} fails SQLite's integrity check; run `vicar memory check`")
            return target.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        finally:
            target.close()
    except sqlite3.DatabaseError as exc:
        raise BrokenStore(f"the record store {src} cannot be copied ({exc}); run `vicar memory check`") from None
    finally:
        source.close()


def _copy_rest(src: Path, dst: Path, with_vectors: bool) -> None:
    ignore = shutil.ignore_patterns(*(p for p in SKIP if not (with_vectors and p == VECTORS)))
    shutil.copytree(src, dst, ignore=ignore, dirs_exist_ok=True, symlinks=True)


def _principals(root: Path, names: list[str] | None) -> list[str]:
    if names:
        return [check_principal(n) for n in names]
    # Only principals' directories: not a restore's staging (.restore-*) or anything else.
    return (
        sorted(p.name for p in root.iterdir() if PRINCIPAL_RE.match(p.name) and (p / DB).is_file())
        if root.is_dir()
        else []
    )


def backup(principals_dir: Path, names: list[str] | None, dest: Path) -> BackupManifest:
    """Back up the named principals (None: every one) into dest, a new or empty directory."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise Conflict(f"{dest} exists and is not an empty directory; back up into a new one")
    chosen = _principals(principals_dir, names)
    if not chosen:
        raise NotFound(f"no principal memory to back up under {principals_dir}")
    for name in chosen:
        if not (child_path(principals_dir, name) / DB).is_file():
            raise NotFound(f"no memory for principal {name!r} under {principals_dir}")
    done = []
    for name in chosen:
        src, out = child_path(principals_dir, name), child_path(dest / "principals", name)
        out.mkdir(parents=True)
        try:
            lock = OwnerLock(src, name)  # quiescent: no worker has it open, none opens it now
        except StoreLocked:
            lock = None  # open in a worker: the records only (see the module docstring)
        try:
            chunks = _sqlite_copy(src / DB, out / DB)
            _copy_rest(src, out, with_vectors=lock is not None)
        finally:
            if lock:
                lock.release()
        done.append(
            PrincipalBackup(principal=name, chunks=chunks, vectors=lock is not None and (out / VECTORS).is_dir())
        )
    manifest = BackupManifest(created_at=datetime.now(UTC), source=str(principals_dir), principals=done)
    (dest / MANIFEST).write_text(manifest.model_dump_json(indent=2))
    return manifest


def read_manifest(src: Path) -> BackupManifest:
    path = src / MANIFEST
    if not path.is_file():
        raise NotFound(f"{src} is not a complete Vicar backup (no {MANIFEST})")
    try:
        manifest = BackupManifest.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise InvalidInput(f"{path} is not a valid backup manifest: {exc.errors()[0]['msg']}") from None
    if manifest.format != FORMAT:
        raise InvalidInput(f"{path} has backup format {manifest.format}; this Vicar reads format {FORMAT}")
    return manifest


def _only_plain_files(backed: Path) -> None:
    """A backup holds directories and regular files only: a symbolic link restored into a
    memory (models/ -> elsewhere) would have the worker write outside the data directory."""
    if not backed.is_dir() or backed.is_symlink():
        raise InvalidInput(f"{backed} is not a directory in the backup")
    for where, dirs, files in os.walk(backed):
        for entry in dirs + files:
            path = Path(where, entry)
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise InvalidInput(
                    f"the backup holds {path}, which is not a regular file or directory; "
                    f"a backup written by `vicar memory backup` has none"
                )


def restore(
    src: Path, principals_dir: Path, names: list[str] | None, *, force: bool, rebuild: Callable[[str], int]
) -> list[RestoreReport]:
    """Restore the named principals (None: all in the backup). A memory already there is
    refused unless force, then moved aside (never deleted). rebuild(principal) rebuilds
    missing vectors from the records and returns how many chunks it re-embedded."""
    manifest = read_manifest(src)
    by_name = {p.principal: p for p in manifest.principals}
    chosen = [check_principal(n) for n in names] if names else list(by_name)
    for name in chosen:
        if name not in by_name:
            raise NotFound(f"principal {name!r} is not in the backup {src} (it has: {', '.join(by_name) or 'none'})")
        if (child_path(principals_dir, name) / DB).exists() and not force:
            raise Conflict(
                f"principal {name!r} already has a memory under {principals_dir}; "
                f"--force moves it aside and restores the backup"
            )
        _only_plain_files(child_path(src / "principals", name))
    principals_dir.mkdir(parents=True, exist_ok=True)
    reports = []
    for name in chosen:
        backed, target = child_path(src / "principals", name), child_path(principals_dir, name)
        staging = principals_dir / f".restore-{name}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        chunks = _sqlite_copy(backed / DB, staging / DB)
        _copy_rest(backed, staging, with_vectors=True)
        replaced = None
        if target.exists():
            lock = OwnerLock(target, name)  # refused (exit 5) while a worker has it open
            try:
                replaced = target.with_name(f"{name}.before-restore-{time.strftime('%Y%m%dT%H%M%S')}")
                target.rename(replaced)
            finally:
                lock.release()
        staging.rename(target)
        reports.append(
            RestoreReport(
                principal=name,
                chunks=chunks,
                vectors_rebuilt=rebuild(name),
                replaced=str(replaced) if replaced else None,
            )
        )
    return reports
