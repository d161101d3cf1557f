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
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator

from vicar.errors import BrokenStore, Conflict, InvalidInput, NotFound
from vicar.memory.names import PRINCIPAL_RE, check_principal, child_path
from vicar.memory.owner import LOCK_FILE, OwnerLock, StoreLocked, describe, read_holder

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


def _holders_of(principals_dir: Path, names: list[str]) -> dict[str, str]:
    """Which of these memories a process has open, and who: a probe that takes each lock
    and lets it go."""
    busy = {}
    for name in names:
        try:
            OwnerLock(child_path(principals_dir, name), name).release()
        except StoreLocked:
            busy[name] = describe(read_holder(child_path(principals_dir, name) / LOCK_FILE))
    return busy


def _refuse_open(busy: dict[str, str]) -> Conflict:
    return Conflict(
        "nothing was replaced: "
        + "; ".join(f"the memory of {name!r} is open in {who}" for name, who in busy.items())
        + ". Stop that worker (or let it go of the memory), then restore again"
    )


def _aside(target: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for k in range(1000):
        replaced = target.with_name(f"{target.name}.before-restore-{stamp}" + (f"-{k}" if k else ""))
        if not replaced.exists():
            return replaced
    raise Conflict(f"too many earlier restores of {target.name!r} this second; try again")


def restore(
    src: Path, principals_dir: Path, names: list[str] | None, *, force: bool, rebuild: Callable[[Path, str], int]
) -> list[RestoreReport]:
    """Restore the named principals (None: all in the backup). A memory already there is
    refused unless force, then moved aside (never deleted). rebuild(root, principal)
    rebuilds missing vectors from the records of the memory under root and returns how
    many chunks it re-embedded.

    All or nothing: every memory to replace must be closed (its lock free) before anything
    is replaced. Each is staged and its vectors rebuilt first, beside the live ones; then,
    holding every lock, each live memory moves aside and its restored copy takes its place.
    A memory open in a worker refuses the whole restore (it once replaced the memories
    before the open one, stopped there and left its staging folder). The staging folder
    goes whatever happens."""
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
    live = [name for name in chosen if child_path(principals_dir, name).exists()]
    if busy := _holders_of(principals_dir, live):  # before any copying: fail fast
        raise _refuse_open(busy)
    # A name a principal cannot have (it starts with a dot): never taken for a memory.
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=principals_dir))
    try:
        staged = {}
        for name in chosen:
            backed, copy = child_path(src / "principals", name), child_path(staging, name)
            copy.mkdir()
            chunks = _sqlite_copy(backed / DB, copy / DB)
            _copy_rest(backed, copy, with_vectors=True)
            staged[name] = (chunks, rebuild(staging, name))
        return _swap_in(principals_dir, staging, chosen, live, staged)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(
    principals_dir: Path, staging: Path, chosen: list[str], live: list[str], staged: dict[str, tuple[int, int]]
) -> list[RestoreReport]:
    """Holding every live memory's lock (and the staged copies', so none is opened half
    way), move each live memory aside and its staged copy into its place; undone if any
    step fails."""
    locks: list[OwnerLock] = []
    busy = {}
    try:
        for name in chosen:
            where = [child_path(staging, name)] + ([child_path(principals_dir, name)] if name in live else [])
            for directory in where:
                try:
                    locks.append(OwnerLock(directory, name))
                except StoreLocked:
                    busy[name] = describe(read_holder(directory / LOCK_FILE))
        if busy:  # opened while the copies were staged
            raise _refuse_open(busy)
        done: list[tuple[str, Path | None]] = []
        try:
            for name in chosen:
                target = child_path(principals_dir, name)
                replaced = _aside(target) if name in live else None
                if replaced:
                    target.rename(replaced)
                done.append((name, replaced))
                child_path(staging, name).rename(target)
        except OSError as exc:
            try:
                _undo(principals_dir, staging, done)
            except OSError as undo_exc:
                raise BrokenStore(
                    f"restore stopped at {name!r} ({exc}) and could not put everything back ({undo_exc}): "
                    f"the memories that were there are under {principals_dir} as *.before-restore-*"
                ) from None
            raise BrokenStore(f"restore stopped at {name!r} ({exc}); nothing was replaced") from None
    finally:
        for lock in locks:
            lock.release()
    return [
        RestoreReport(
            principal=name, chunks=staged[name][0], vectors_rebuilt=staged[name][1], replaced=str(r) if r else None
        )
        for name, r in done
    ]


def _undo(principals_dir: Path, staging: Path, done: list[tuple[str, Path | None]]) -> None:
    """Put back what a failed swap moved, last first: the restored copy to staging, the
    memory that was there to its place."""
    for name, replaced in reversed(done):
        target = child_path(principals_dir, name)
        if target.exists() and not child_path(staging, name).exists():
            target.rename(child_path(staging, name))
        if replaced is not None and replaced.exists() and not target.exists():
            replaced.rename(target)
