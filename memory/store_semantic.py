"""The record store's semantic records beside the chunks: facts (preferences,
procedures), censors, and the consolidation log that audits both. A mixin of
RecordStore (memory/store.py), over its connection, lock and transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from vicar.memory.censor import Censor
from vicar.memory.chunk import MemoryChunk
from vicar.memory.fact import Fact


class SemanticRecords:
    _lock: threading.RLock
    _db: sqlite3.Connection
    _cached: OrderedDict[str, MemoryChunk]

    if TYPE_CHECKING:

        def transaction(self, chunk_rows_kept: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def get_chunk(self, chunk_id: str) -> MemoryChunk | None: ...

    # -- facts ---------------------------------------------------------------

    def facts_by_id(self, ids: Sequence[str]) -> list[Fact]:
        if not ids:
            return []
        with self._lock:
            rows = self._db.execute(
                f"SELECT entry FROM facts WHERE id IN ({', '.join('?' * len(ids))})", tuple(ids)
            ).fetchall()
        return [Fact.model_validate_json(r[0]) for r in rows]

    def facts(self, kind: str, state: str | None = None, task_type: str | None = None) -> list[Fact]:
        """One kind's facts (any stage), of one context or all, oldest first."""
        sql = "SELECT entry FROM facts WHERE kind = ?"
        params: tuple[str | None, ...] = (kind,)
        if state is not None:
            sql, params = sql + " AND state = ? AND task_type = ?", (kind, state, task_type)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY rowid", params).fetchall()
        return [Fact.model_validate_json(r[0]) for r in rows]

    def save_facts(self, facts: Sequence[Fact], audit: Sequence[tuple[str, str, str, str | None, str]] = ()) -> None:
        """Write facts (new or changed) in one transaction; a fact no longer live takes
        its chunk out of retrieval (kept, marked). `audit`: (decision id, op, chunk id,
        target id, reason) rows for the audit log, each written once, with the chunk's
        record as its tombstone."""
        with self.transaction() as db:
            self.write_facts(db, facts, audit)

    def write_facts(
        self, db: sqlite3.Connection, facts: Sequence[Fact], audit: Sequence[tuple[str, str, str, str | None, str]]
    ) -> None:
        for decision_id, op, chunk_id, target, reason in audit:
            chunk = self.get_chunk(chunk_id)
            self.log_decision(
                db, decision_id, "facts", op, chunk_id, target, reason, chunk.model_dump_json() if chunk else None
            )
        for f in facts:
            db.execute(
                "INSERT OR REPLACE INTO facts (id, kind, state, task_type, entry) VALUES (?, ?, ?, ?, ?)",
                (f.id, f.kind, f.state, f.task_type, f.model_dump_json()),
            )
            if not f.live:
                db.execute(
                    "UPDATE chunks SET status = 'superseded', superseded_by = ? WHERE id = ?", (f.successor, f.id)
                )
                self._cached.pop(f.id, None)

    # -- censors ---------------------------------------------------------------

    def add_censor(self, censor: Censor) -> bool:
        """Once per id: a retried learning step writes nothing new."""
        with self.transaction(chunk_rows_kept=True) as db:
            return bool(
                db.execute(
                    "INSERT OR IGNORE INTO censors (id, kind, state, task_type, entry) VALUES (?, ?, ?, ?, ?)",
                    (censor.id, censor.kind, censor.state, censor.task_type, censor.model_dump_json()),
                ).rowcount
            )

    def censors(self, kind: str | None = None, state: str | None = None, task_type: str | None = None) -> list[Censor]:
        """Every censor (any status), or one context's, oldest first."""
        sql = "SELECT entry FROM censors"
        params: tuple[str | None, ...] = ()
        if kind is not None:
            sql, params = sql + " WHERE kind = ? AND state = ? AND task_type = ?", (kind, state, task_type)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY rowid", params).fetchall()
        return [Censor.model_validate_json(r[0]) for r in rows]

    def update_censor(self, censor_id: str, change: Callable[[Censor], Censor]) -> Censor | None:
        with self.transaction(chunk_rows_kept=True) as db:
            return self.change_censor(db, censor_id, change)

    @staticmethod
    def change_censor(db: sqlite3.Connection, censor_id: str, change: Callable[[Censor], Censor]) -> Censor | None:
        """Inside the caller's transaction: the censor rewritten by `change` (None: no such censor)."""
        row = db.execute("SELECT entry FROM censors WHERE id = ?", (censor_id,)).fetchone()
        if row is None:
            return None
        new = change(Censor.model_validate_json(row[0]))
        db.execute("UPDATE censors SET entry = ? WHERE id = ?", (new.model_dump_json(), censor_id))
        return new

    # -- consolidation -------------------------------------------------------

    def applied_decisions(self, session_id: str) -> set[str]:
        with self._lock:
            return {
                r[0]
                for r in self._db.execute(
                    "SELECT decision_id FROM consolidation_log WHERE session_id = ?", (session_id,)
                )
            }

    def log_decision(
        self,
        db: sqlite3.Connection,
        decision_id: str,
        session_id: str,
        op: str,
        chunk_id: str,
        target_id: str | None,
        reason: str,
        tombstone: str | None,
    ) -> bool:
        """Inside the caller's transaction: False if the decision was already applied."""
        seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM consolidation_log").fetchone()[0]
        cur = db.execute(
            "INSERT OR IGNORE INTO consolidation_log VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (decision_id, session_id, op, chunk_id, target_id, reason, tombstone, seq),
        )
        return bool(cur.rowcount)

    def audit_log(self) -> list[dict]:
        with self._lock:
            cur = self._db.execute("SELECT * FROM consolidation_log ORDER BY seq")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    def tensions(self) -> set[tuple[str, str]]:
        with self._lock:
            return {(a, b) for a, b in self._db.execute("SELECT a, b FROM tensions")}
