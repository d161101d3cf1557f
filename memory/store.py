"""Per-principal record store: chunks, traces and counters in SQLite (WAL).

The store is the source of truth; vectors in Chroma are keyed by the same chunk ids.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from vicar.memory.chunk import MemoryChunk
from vicar.memory.migrations import COLUMNS as _COLUMNS
from vicar.memory.migrations import MIGRATIONS
from vicar.memory.store_errors import RecordsUnusable, StoreError, raise_if_disk_full, records_unusable
from vicar.memory.store_semantic import SemanticRecords

__all__ = ["MIGRATIONS", "RecordStore", "Reply", "RecordsUnusable", "StoreError", "records_unusable"]


# FULL: a commit returns only once its WAL frames are fsync'd. The human's answer is
# recorded by an activity whose completion lets Temporal forget it; under NORMAL a power
# loss within the kernel's writeback delay (~30 s on ext4) took recorded answers with it
# (tests/test_durability.py). The gate bench measures the cost against NORMAL (the only
# reason this is a module constant).
DURABLE_SYNCHRONOUS = "FULL"

# Chunks kept in memory (built, without traces), by id: retrieval reads its top-k hits
# and the lineage's last verdicts at every gate, mostly the same recent chunks.
CACHED_CHUNKS = 4096


class Reply(NamedTuple):
    """A human answer as the facts' extraction reads it."""

    id: str
    outcome: str
    human_response: str


class RecordStore(SemanticRecords):
    """One SQLite file per principal. Thread-safe: one connection behind a lock."""

    def __init__(self, path: Path, durable: bool = True) -> None:
        """durable=False: a store deleted after use, whose checkpoints need not wait for
        the disk (they cost the replay evaluation a third of a millisecond per write)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._cached: OrderedDict[str, MemoryChunk] = OrderedDict()  # built, without traces
        self._principal: str | None = None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={DURABLE_SYNCHRONOUS if durable else 'OFF'}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException as exc:
            self._db.close()
            if not isinstance(exc, sqlite3.DatabaseError):
                raise  # DiskFull from the migration's transaction, a newer schema
            raise_if_disk_full(path, exc)
            if isinstance(exc, sqlite3.OperationalError):
                raise  # locked, no permission: not the file's fault, may pass
            raise records_unusable(path, exc) from exc

    @classmethod
    def reader(cls, path: Path, connection: sqlite3.Connection) -> "RecordStore":
        """The read methods over a connection that cannot write (memory/readonly.py):
        no pragma, no migration, nothing written."""
        self = cls.__new__(cls)
        self.path, self._db, self._lock = path, connection, threading.RLock()
        self._cached, self._principal = OrderedDict(), None
        return self

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self, chunk_rows_kept: bool = False) -> Iterator[sqlite3.Connection]:
        """`chunk_rows_kept`: the caller changes no existing chunk row (it may insert
        one), so the cached rows stay valid. Any other transaction, such as
        consolidation's updates, empties the cache."""
        with self._lock:
            if self._db.in_transaction:
                # Left open by a caller interrupted between BEGIN and COMMIT/ROLLBACK: a sync
                # activity's cancellation is raised asynchronously in its thread, anywhere.
                # Under the lock nobody else is in it; its caller already failed, so undo it.
                # Left alone, every later transaction failed ("cannot start a transaction
                # within a transaction") and the principal's turns were refused for ever.
                self._db.execute("ROLLBACK")
                self._cached.clear()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException as exc:
                # A failed write (a full disk) may have rolled the transaction back already:
                # ROLLBACK would then fail and hide why.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise_if_disk_full(self.path, exc)
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    raise_if_disk_full(self.path, exc)
                    raise
            finally:
                if not chunk_rows_kept:
                    self._cached.clear()

    def _migrate(self) -> None:
        with self.transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(f"{self.path} has schema version {version}; this Vicar knows up to {len(MIGRATIONS)}")
            for i in range(version, len(MIGRATIONS)):
                for statement in MIGRATIONS[i].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {i + 1}")

    # -- chunks and traces -------------------------------------------------

    def add_chunk(self, chunk: MemoryChunk) -> bool:
        """Insert a chunk with its first trace; False (and no change) if it exists."""
        row = chunk.model_dump()
        row["salient_percepts"] = json.dumps(chunk.salient_percepts)
        row["kind"] = chunk.kind.value
        with self.transaction(chunk_rows_kept=True) as db:
            if db.execute("SELECT 1 FROM chunks WHERE id = ?", (chunk.id,)).fetchone():
                return False
            db.execute(
                f"INSERT INTO chunks ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                [row[c] for c in _COLUMNS],
            )
            traces = sorted(set(chunk.traces) | {chunk.created_n})
            db.executemany(
                "INSERT OR IGNORE INTO traces (chunk_id, n) VALUES (?, ?)",
                [(chunk.id, n) for n in traces],
            )
            return True

    def add_traces(self, chunk_ids: list[str], n: int) -> list[str]:
        """Add trace n to each chunk and count the chunks as used together, in one
        transaction; (chunk, n) pairs already present are skipped, so a retry changes
        nothing. Returns the ids that really got a new trace."""
        added: list[str] = []
        with self.transaction(chunk_rows_kept=True) as db:
            for cid in dict.fromkeys(chunk_ids):
                if not db.execute("SELECT 1 FROM chunks WHERE id = ?", (cid,)).fetchone():
                    raise StoreError(f"cannot reinforce unknown chunk {cid}")
                cur = db.execute("INSERT OR IGNORE INTO traces (chunk_id, n) VALUES (?, ?)", (cid, n))
                if cur.rowcount:
                    added.append(cid)
            db.executemany(
                "INSERT INTO coaccess (a, b, n) VALUES (?, ?, 1) ON CONFLICT(a, b) DO UPDATE SET n = n + 1",
                [(a, b) for a in added for b in added if a != b],
            )
        return added

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection under the store's lock, for reads that must see one state: the
        proxy's bookkeeping (vicar/proxy/outcome_log.py, vicar/proxy/autonomy/) keeps its
        own queries over its tables."""
        with self._lock:
            yield self._db

    # -- chunk status and recent answers ------------------------------------

    def set_status(self, chunk_ids: Sequence[str], status: str) -> None:
        if not chunk_ids:
            return
        with self.transaction() as db:
            db.executemany("UPDATE chunks SET status = ? WHERE id = ?", [(status, cid) for cid in chunk_ids])

    def recent_human_answers(self, kind: str, state: str, task_type: str, limit: int) -> list[MemoryChunk]:
        """The latest `limit` human answers of one context, newest first, without traces."""
        return self.get_chunks([r.id for r in self.recent_human_replies(kind, state, task_type, limit)], False)

    def recent_human_replies(self, kind: str, state: str, task_type: str, limit: int) -> list[Reply]:
        """The same answers as `recent_human_answers`, as (id, outcome, human_response)
        only: a walk of `limit` entries down the chunks_context_recent index, no chunk
        built (the facts' extraction reads them every session)."""
        with self._lock:
            return [
                Reply(*r)
                for r in self._db.execute(
                    "SELECT id, outcome, human_response FROM chunks WHERE state = ? AND task_type = ?"
                    " AND answered_by = 'human' AND kind = ? ORDER BY created_n DESC LIMIT ?",
                    (state, task_type, kind, limit),
                )
            ]

    def proxy_answers_on(
        self,
        kind: str,
        lineage: str,
        since_n: int,
        before_n: int,
        outcomes: tuple[str, ...] = ("approve",),
        most: int = 16,
        revision: str | None = None,
    ) -> list[MemoryChunk]:
        """The proxy's own answers (of these actions) on a lineage (and, given, one
        revision of it), created in [since_n, before_n): an index range, newest first,
        at most `most`."""
        if not lineage or since_n >= before_n:
            return []
        marks = ", ".join("?" * len(outcomes))
        same = " AND revision = ?" if revision is not None else ""
        with self._lock:
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM chunks INDEXED BY chunks_lineage_proxy WHERE kind = ? AND lineage = ?"
                    f" AND answered_by = 'proxy' AND created_n >= ? AND created_n < ? AND outcome IN ({marks}){same}"
                    " ORDER BY created_n DESC LIMIT ?",
                    (kind, lineage, since_n, before_n, *outcomes, *([revision] if same else []), most),
                )
            ]
        return self.get_chunks(ids, with_traces=False)

    def outcomes(
        self, after_seq: int = 0, answered_by: str | None = None, limit: int | None = None, newest: bool = False
    ) -> list[tuple[int, str]]:
        """(seq, record JSON) in log order (or the newest `limit` ones, still in order)."""
        sql = "SELECT seq, record FROM outcomes WHERE seq > ?"
        params: list = [after_seq]
        if answered_by:
            sql += " AND answered_by = ?"
            params.append(answered_by)
        sql += " ORDER BY seq DESC" if newest else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return rows[::-1] if newest else rows

    def outcome_seq(self, workflow_id: str) -> int | None:
        with self._lock:
            row = self._db.execute("SELECT seq FROM outcomes WHERE workflow_id = ?", (workflow_id,)).fetchone()
        return row[0] if row else None

    def outcome_record(self, workflow_id: str) -> str | None:
        """The record JSON logged for this gate's workflow id (None: not recorded)."""
        with self._lock:
            row = self._db.execute("SELECT record FROM outcomes WHERE workflow_id = ?", (workflow_id,)).fetchone()
        return row[0] if row else None

    def coaccess(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return self._db.execute("SELECT a, b, n FROM coaccess").fetchall()

    def index_rows(self) -> list[tuple[str, ...]]:
        """(id, kind, state, task_type, outcome, answered_by, status) of every chunk, in creation order."""
        with self._lock:
            return self._db.execute(
                "SELECT id, kind, state, task_type, outcome, answered_by, status FROM chunks ORDER BY created_n, id"
            ).fetchall()

    def get_chunk(self, chunk_id: str) -> MemoryChunk | None:
        chunks = self.get_chunks([chunk_id])
        return chunks[0] if chunks else None

    def get_chunks(self, chunk_ids: list[str], with_traces: bool = True) -> list[MemoryChunk]:
        """The chunks with these ids, in the given order (missing ones left out).
        Without traces, their rows come from the cache where it has them."""
        if not chunk_ids:
            return []
        if with_traces:
            marks = ", ".join("?" * len(chunk_ids))
            found = {c.id: c for c in self.chunks(where=f"id IN ({marks})", params=tuple(chunk_ids))}
            return [found[i] for i in chunk_ids if i in found]
        with self._lock:
            found = {i: self._cached[i] for i in chunk_ids if i in self._cached}
            for i in found:
                self._cached.move_to_end(i)
            missing = [i for i in dict.fromkeys(chunk_ids) if i not in found]
            if missing:
                for r in self._select(f"id IN ({', '.join('?' * len(missing))})", tuple(missing)):
                    found[r[0]] = self._cached[r[0]] = self._chunk(r, [])
                while len(self._cached) > CACHED_CHUNKS:
                    self._cached.popitem(last=False)
        # A copy each, with lists of its own: a caller may change what it was given.
        return [
            found[i].model_copy(update={"salient_percepts": list(found[i].salient_percepts), "traces": []})
            for i in chunk_ids
            if i in found
        ]

    def _select(self, where: str, params: tuple) -> list[tuple]:
        return self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM chunks WHERE {where} ORDER BY created_n, id", params
        ).fetchall()

    def _chunk(self, row: tuple, traces: list[int]) -> MemoryChunk:
        d = dict(zip(_COLUMNS, row))
        d["salient_percepts"] = json.loads(d["salient_percepts"])
        return MemoryChunk(principal=self.principal, traces=traces, **d)

    def chunks(self, where: str = "1", params: tuple = (), with_traces: bool = True) -> list[MemoryChunk]:
        """Chunks matching a WHERE clause on chunk columns, with their traces (or with
        none: a chunk used often has a trace per use, and retrieval, which has the
        activations in its index, must not read them all at every gate)."""
        with self._lock:
            rows = self._select(where, params)
            traces: dict[str, list[int]] = {r[0]: [] for r in rows}
            # Only the traces of the selected chunks (the primary key serves the join).
            for cid, n in (
                self._db.execute(
                    f"SELECT chunk_id, n FROM traces JOIN chunks ON chunks.id = traces.chunk_id "
                    f"WHERE {where} ORDER BY n",
                    params,
                )
                if with_traces
                else ()
            ):
                traces[cid].append(n)
        return [self._chunk(r, traces[r[0]]) for r in rows]

    def lineage_history(self, kind: str, lineage: str, before_n: int, limit: int) -> list[MemoryChunk]:
        """The latest human-answered chunks (not superseded) of this kind and lineage created before
        `before_n`, most recent first: a walk down the (kind, lineage, created_n) index.
        Without their traces: verdicts, not activations."""
        if not lineage or limit <= 0:
            return []
        with self._lock:
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM chunks WHERE id IN (SELECT id FROM chunks INDEXED BY chunks_lineage"
                    " WHERE kind = ? AND lineage = ? AND created_n < ? AND answered_by = 'human'"
                    " AND status != 'superseded' ORDER BY created_n DESC LIMIT ?) ORDER BY created_n DESC, id DESC",
                    (kind, lineage, before_n, limit),
                )
            ]
        return self.get_chunks(ids, with_traces=False)

    def all_traces(self) -> list[tuple[str, int]]:
        with self._lock:
            return self._db.execute("SELECT chunk_id, n FROM traces").fetchall()

    def count(self, where: str = "1", params: tuple = ()) -> int:
        with self._lock:
            return self._db.execute(f"SELECT COUNT(*) FROM chunks WHERE {where}", params).fetchone()[0]

    def trace_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM traces").fetchone()[0]

    def human_answers_from(self, agent: str, most: int) -> int:
        """How many of this upstream agent's artifacts the human has answered, counted up
        to `most`: O(most), however long the agent's history."""
        with self._lock:
            return self._db.execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM chunks INDEXED BY chunks_agent"
                " WHERE upstream_agent = ? AND answered_by = 'human' LIMIT ?)",
                (agent, max(0, most)),
            ).fetchone()[0]

    def memory_depth(self) -> int:
        """Distinct (state, task_type) pairs the human has answered: the cold-start measure."""
        with self._lock:
            return self._db.execute(
                "SELECT COUNT(*) FROM (SELECT DISTINCT state, task_type FROM chunks WHERE answered_by = 'human')"
            ).fetchone()[0]

    # -- meta: counter and embedding model ----------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        if key == "principal":
            self._principal = None
        with self.transaction(chunk_rows_kept=True) as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    @property
    def principal(self) -> str:
        if self._principal is None:
            self._principal = self.get_meta("principal") or ""
        return self._principal

    def counter(self) -> int:
        value = self.get_meta("counter")
        return int(value) if value else 0

    def raise_counter(self, n: int) -> int:
        """Mirror the brain's counter: only ever moves forward. Returns the stored value."""
        return self.advance_counter(n, None)[1]

    def advance_counter(self, n: int | None, after: str | None) -> tuple[bool, int]:
        """Raise the counter to `n` only if the workflow `after` has logged its outcome
        (None: no condition), in one transaction: a turn is handed on only once its
        holder's record is in. Returns (whether the condition held, the stored counter)."""
        with self.transaction(chunk_rows_kept=True) as db:
            free = (
                after is None
                or db.execute("SELECT 1 FROM outcomes WHERE workflow_id = ?", (after,)).fetchone() is not None
            )
            row = db.execute("SELECT value FROM meta WHERE key = 'counter'").fetchone()
            current = int(row[0]) if row else 0
            if free and n is not None and n > current:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('counter', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(n),),
                )
                current = n
            return free, current
