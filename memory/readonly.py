"""Reading a principal's memory without writing a byte: `vicar memory check` runs beside
the worker, on a backup copy and on a read-only mount, and must change none of them
(opening the store the usual way set pragmas, ran the migration transaction and left
-wal/-shm files behind; opening Chroma's client wrote its system tables)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path


def connect(db: Path) -> sqlite3.Connection:
    """A connection that cannot write. With a -wal file beside the database (a writer has
    it open, or one died), `mode=ro` reads the committed frames through it and writes
    nothing. Without one, every committed transaction is in the main file: `immutable`
    reads it as it is, where `mode=ro` would create -wal and -shm files (and cannot open a
    WAL database at all on a read-only filesystem). A writer that opens the memory during
    the check writes into a new WAL; only its first checkpoint, after ~1000 pages, would
    touch the main file under the reader."""
    if not db.exists():
        raise sqlite3.OperationalError(f"unable to open database file {db}: it does not exist")
    with open(db, "rb") as f:
        header = f.read(20)
    # Bytes 18-19 are 2 in a WAL database. A rollback-journal one (Chroma's) is written in
    # place by its writer: mode=ro takes SQLite's shared lock for that and creates nothing.
    in_wal = header[18:20] == b"\x02\x02"
    wal = db.with_name(db.name + "-wal")
    mode = "immutable=1" if in_wal and not wal.exists() else "mode=ro"
    con = sqlite3.connect(f"{db.resolve().as_uri()}?{mode}", uri=True, check_same_thread=False)
    try:
        con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return con
    except sqlite3.OperationalError:
        con.close()
        if os.access(db.parent, os.W_OK) or not in_wal:
            raise
    # A WAL left by a writer that died, without its -shm, on a read-only filesystem: SQLite
    # cannot build the index it reads the WAL through. Nobody can write there, so a copy
    # of the two files is the same database; it is read and thrown away.
    tmp = Path(tempfile.mkdtemp(prefix="vicar-check-"))
    try:
        shutil.copyfile(db, tmp / db.name)
        shutil.copyfile(wal, tmp / wal.name)
        copy = sqlite3.connect(tmp / db.name, check_same_thread=False)
        # Loaded into memory so the copy can go at once: the caller only reads.
        mem = sqlite3.connect(":memory:", check_same_thread=False)
        copy.backup(mem)
        copy.close()
        return mem
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def vector_ids(chroma_sqlite: Path, collection: str) -> list[tuple[str, str]]:
    """(vector id, chunk id) of every vector in one collection, read from Chroma's own
    SQLite file (its metadata segment, which Chroma writes in the same call as the
    vectors): what VectorStore.ids() returns, without starting a Chroma client, which
    writes. tests/test_store.py checks the two agree on the installed Chroma."""
    if not chroma_sqlite.exists():
        return []
    con = connect(chroma_sqlite)
    try:
        return con.execute(
            "SELECT e.embedding_id, m.string_value FROM embeddings e"
            " JOIN segments s ON s.id = e.segment_id JOIN collections c ON c.id = s.collection"
            " JOIN embedding_metadata m ON m.id = e.id AND m.key = 'chunk_id'"
            " WHERE c.name = ? ORDER BY e.embedding_id",
            (collection,),
        ).fetchall()
    finally:
        con.close()
