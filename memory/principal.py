"""One principal's memory: record store + vectors + in-process index, behind one API.

Each principal has its own directory, SQLite file, Chroma client and index: there is
no shared collection or table through which one principal's chunks could reach another.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from vicar.memory.chunk import BLENDED, DIMENSIONS, MemoryChunk, blended_text
from vicar.memory.diskfull import DiskFull, disk_full, is_disk_full
from vicar.memory.embedder import Embedder
from vicar.memory.index import STRUCT_FIELDS, MemoryIndex, single_threaded_blas
from vicar.memory.lexical import LexicalIndex
from vicar.memory.names import check_principal, child_path
from vicar.memory.owner import OwnerLock
from vicar.memory.params import MemoryParams
from vicar.memory.retrieval import EmbeddingMode, Hit, Query, rank
from vicar.memory.storage import RETRIEVABLE, UNINDEXED, StorageDecision, decide
from vicar.memory.store import RecordStore, StoreError, records_unusable
from vicar.memory.vectors import InMemoryVectors, VectorStore, open_vectors, vector_id, vectors_unusable

log = logging.getLogger(__name__)


class MemoryStats(BaseModel):
    principal: str
    chunks: int
    human_answered: int
    proxy_answered: int
    traces: int
    counter: int
    memory_depth: int
    by_context: dict[str, int]
    embedding_model: str


class ReconcileReport(BaseModel):
    missing_vectors: int  # chunks whose vectors were missing and have been re-embedded
    orphan_vectors: int  # vectors without a record, kept (see lost_records)
    lost_records: list[str] = []  # their chunk ids: answers whose record is gone


def noise_seed(principal: str, n: int, salt: str = "") -> int:
    """A seed fixed by (principal, N): the same retrieval gives the same noise on retry."""
    return int.from_bytes(hashlib.blake2b(f"{principal}\0{n}\0{salt}".encode(), digest_size=8).digest(), "big")


class PrincipalMemory:
    def __init__(
        self, principal: str, root: Path, embedder: Embedder, params: MemoryParams, throwaway: bool = False
    ) -> None:
        """throwaway: a fresh memory deleted after use (the replay evaluation), with its
        vectors in the index only (Chroma's ~8 ms per write would dominate) and a record
        store that never waits for the disk."""
        self.principal = check_principal(principal)
        self.dir = child_path(root, principal)  # a directory linked out of root is refused
        self.embedder = embedder
        self.params = params
        self._lock = threading.RLock()
        # Set in the try below; close() also runs on a memory whose opening failed half way,
        # so it looks them up with getattr.
        self.store: RecordStore
        self.vectors: VectorStore | InMemoryVectors
        self.rebuilt_on_open: ReconcileReport | None = None  # vectors re-embedded when opened
        self.last_storage: StorageDecision | None = None  # the latest storage decision (MemoryParams.storage)
        self._owner: OwnerLock | None = None
        try:
            self._owner = OwnerLock(self.dir, principal)  # before anything is read: one process per memory
            self.store = RecordStore(self.dir / "memory.db", durable=not throwaway)
            self._claim("principal", principal)
            self._claim("embedding_model", embedder.model_name)
            self.vectors = InMemoryVectors() if throwaway else open_vectors(self.dir, principal, embedder.model_name)
            self.index = MemoryIndex(embedder.dim, params.hybrid_k)
            # The (state, task type) pairs the human has answered, kept as chunks come
            # (chunks are never deleted): the cold-start measure without a scan per gate.
            self._human_contexts: set[tuple[str, str]] = set()
            self.lexical = LexicalIndex(self._lexical_texts)
            self._rebuild()
            if self.chunks_without_vectors() or (self.params.blended_vectors and self.chunks_without_vectors(BLENDED)):
                # Records are the source of truth: vectors lost with a deleted or emptied
                # chroma/ are re-embedded now, not left to fail retrieval silently.
                report = self.rebuilt_on_open = self.reconcile()
                log.warning(
                    "memory of %s: %d of %d chunks had no vectors; rebuilt them from the records "
                    "(%d vectors without a record kept)",
                    principal,
                    report.missing_vectors,
                    len(self.index),
                    report.orphan_vectors,
                )
        except BaseException as exc:
            self.close()  # the lock too, whatever failed
            if is_disk_full(exc) and not isinstance(exc, DiskFull):
                # The lock file, Chroma's files: wherever the first write failed.
                raise disk_full(self.dir, exc) from exc
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
                raise records_unusable(self.dir / "memory.db", exc) from exc
            raise

    def _claim(self, key: str, value: str) -> None:
        stored = self.store.get_meta(key)
        if stored is None:
            self.store.set_meta(key, value)
        elif stored != value:
            raise StoreError(
                f"memory at {self.dir} belongs to {key} {stored!r}, not {value!r}"
                + ("; migrate it with `vicar memory reembed`" if key == "embedding_model" else "")
            )

    def _rebuild(self) -> None:
        traces: dict[str, list[int]] = {}
        for cid, n in self.store.all_traces():
            traces.setdefault(cid, []).append(n)
        for row in self.store.index_rows():
            fields = dict(zip(STRUCT_FIELDS, row[1:]))
            self.index.add_chunk(row[0], fields, traces.get(row[0], []))
            self._note_context(fields["answered_by"], fields["state"], fields["task_type"])
        try:
            for cid, dim, vec in self.vectors.load_all():
                self.index.set_vector(cid, dim, vec)
        except Exception as exc:  # Chroma's errors have no common base
            raise vectors_unusable(self.dir, self.principal, exc) from exc
        for a, b, n in self.store.coaccess():
            if a in self.index.pos and b in self.index.pos:
                links = self.index.coaccess.setdefault(self.index.pos[a], {})
                links[self.index.pos[b]] = n

    def chunks_without_vectors(self, dim: str = "situation") -> int:
        """Chunks with no vector at all. Every chunk has a situation text (state and task
        type are never empty), so one without a situation vector lost its vectors. With
        `dim`: chunks without that dimension's vector."""
        indexed = np.setdiff1d(np.arange(len(self.index)), self.index.candidates({"status": list(UNINDEXED)}))
        col = self.index.vectors.get(dim)
        if col is None:
            return len(indexed)
        col.grow_to(len(self.index))
        return int(np.count_nonzero(col.row_of.view[indexed] < 0))

    def close(self) -> None:
        """Close the records and the vectors, then let go of the memory. The lock goes
        whatever closing them raised: kept, the principal was refused to this process,
        as in use by itself, until it exited. Also closes a memory whose opening failed
        half way (hence the getattr)."""
        try:
            store = getattr(self, "store", None)
            if store is not None:
                store.close()
        finally:
            try:
                vectors = getattr(self, "vectors", None)
                if isinstance(vectors, VectorStore):
                    vectors.close()
            finally:
                owner = getattr(self, "_owner", None)
                if owner is not None:
                    owner.release()

    # -- writes ---------------------------------------------------------------

    def record(self, chunk: MemoryChunk) -> bool:
        """Store a chunk and its vectors. Idempotent: a retry re-upserts the same vectors
        under the same id and adds no second record or trace. Returns True if new."""
        if chunk.principal != self.principal:
            raise StoreError(f"chunk of {chunk.principal!r} offered to memory of {self.principal!r}")
        texts = chunk.vector_texts(self.params.blended_vectors)
        vecs = dict(zip(texts, self.embedder.embed(list(texts.values())))) if texts else {}
        with self._lock:
            stored = self.store.get_chunk(chunk.id)
            if stored is None and self.params.storage:
                # Decided once: a retry finds the record and its status.
                self.last_storage = decision = decide(self.index, chunk, vecs, chunk.created_n, self.params)
                chunk = _as_decided(chunk, decision)
            status = (stored or chunk).status
            if status in UNINDEXED:
                vecs = {}
            # Queued first, written within a second (memory/vectors.py): a crash may leave
            # a record without vectors, re-embedded when the memory opens; the record is
            # the answer, and it is durable when this returns.
            try:
                self.vectors.upsert(chunk.id, vecs)
            except Exception as exc:  # Chroma's errors have no common base
                if is_disk_full(exc):
                    raise disk_full(self.dir / "chroma", exc) from exc
                raise
            created = self.store.add_chunk(chunk)
            stored = chunk if created else self.store.get_chunk(chunk.id)
            assert stored is not None  # not created: it was there already
            self.index.add_chunk(chunk.id, _fields(stored), stored.traces)
            for dim, vec in vecs.items():
                self.index.set_vector(chunk.id, dim, vec)
            if stored.status == "merged" and stored.superseded_by:
                # The duplicate met again: its trace (once per N, however often retried).
                for cid in self.store.add_traces([stored.superseded_by], stored.created_n):
                    self.index.add_trace(cid, stored.created_n)
            if created and stored.status not in UNINDEXED:
                self.lexical.add(self.index.pos[chunk.id], _lexical_text(chunk))
            self._note_context(chunk.answered_by, chunk.state, chunk.task_type)
        return created

    def settle_buffer(self) -> tuple[int, int]:
        """At consolidation: a buffered chunk met again since it was stored (a trace
        after its creation) becomes active; the others are dropped (the record stays,
        the vectors go). Returns (kept, dropped)."""
        with self._lock:
            buffered = self.store.chunks("status = 'buffered'")
            kept = [c.id for c in buffered if any(n > c.created_n for n in c.traces)]
            dropped = [c.id for c in buffered if c.id not in set(kept)]
            self.store.set_status(kept, "active")
            self.store.set_status(dropped, "dropped")
            for cid in kept:
                self.index.set_field(cid, "status", "active")
            for cid in dropped:
                self.index.set_field(cid, "status", "dropped")
            self.vectors.delete([vector_id(cid, d) for cid in dropped for d in (*DIMENSIONS, BLENDED)])
        return len(kept), len(dropped)

    def _note_context(self, answered_by: str, state: str, task_type: str) -> None:
        if answered_by == "human":
            self._human_contexts.add((state, task_type))

    def memory_depth(self) -> int:
        """Distinct (state, task_type) pairs the human has answered (RecordStore.memory_depth
        counts the same from the records)."""
        with self._lock:
            return len(self._human_contexts)

    def size(self) -> int:
        """Every chunk in the store, superseded ones too: the index holds them all, and
        SQLite's COUNT(*) walks the whole table."""
        with self._lock:
            return len(self.index)

    def reinforce(self, chunk_ids: list[str], n: int) -> list[str]:
        """ACT-R rule 2: a retrieval trace at N for chunks the proxy used; once per
        (chunk, N). Chunks used together also strengthen their co-access link."""
        with self._lock:
            added = self.store.add_traces(chunk_ids, n)
            for cid in added:
                self.index.add_trace(cid, n)
            self.index.add_coaccess(added)
        return added

    def raise_counter(self, n: int) -> int:
        return self.store.raise_counter(n)

    def advance_counter(self, n: int | None, after: str | None) -> tuple[bool, int]:
        return self.store.advance_counter(n, after)

    def counter(self) -> int:
        return self.store.counter()

    # -- reads ----------------------------------------------------------------

    def query_vectors(self, texts: dict[str, str], blended: bool = False) -> dict[str, np.ndarray]:
        """One batched embedding call for the query's dimensions, or for its blended text."""
        texts = {d: t for d, t in texts.items() if t.strip() and d in DIMENSIONS}
        if not texts:
            return {}
        if blended:
            texts = {BLENDED: blended_text(texts)}
        return dict(zip(texts, self.embedder.embed(list(texts.values()))))

    def similarity(self, a: str, b: str, dim: str) -> float | None:
        """The cosine of two chunks' vectors on one dimension; None when either has none."""
        va = self.index.vectors_of(a, (dim,)).get(dim) if a in self.index.pos else None
        vb = self.index.vectors_of(b, (dim,)).get(dim) if b in self.index.pos else None
        if va is None or vb is None:
            return None
        norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
        return float(va @ vb) / norm if norm else None

    def retrieve(self, query: Query) -> list[tuple[Hit, MemoryChunk]]:
        if "status" not in query.filters:
            # Superseded chunks stay in the store (and the audit trail), never in retrieval.
            query = query.model_copy(update={"filters": {**query.filters, "status": RETRIEVABLE}})
        qvecs = self.query_vectors(query.texts, blended=query.embedding is EmbeddingMode.blended)
        with self._lock:
            lexical = None
            if query.lexical:
                lexical = self.lexical.ranks(" ".join(query.texts.values()), len(self.index))
            hits = rank(self.index, query, qvecs, self.params, lexical)
        return self._with_chunks(hits)

    def lineage_history(self, kind: str, lineage: str, before_n: int, limit: int = 3) -> list[MemoryChunk]:
        """The principal's latest human verdicts on this lineage before N, most recent
        first: an exact structural match (one index lookup), neither ranked by
        similarity nor cut by the activation threshold."""
        return self.store.lineage_history(kind, lineage, before_n, limit)

    def salient(self, artifact: str, now: int, top_k: int = 5) -> list[tuple[Hit, MemoryChunk]]:
        """The salience index: chunks whose surprise (description and percepts) is close
        to this artifact, i.e. past artifacts that changed the proxy's mind like it might."""
        if not artifact.strip():
            return []
        q = self.embedder.embed([artifact[:2000]])[0]
        p = self.params
        with self._lock:
            col = self.index.vectors.get("salience")
            if col is None:
                return []
            col.grow_to(len(self.index))
            idx = np.flatnonzero(col.row_of.view >= 0)
            act = self.index.activations(now, p.decay, p.age_floor, p.activation_mode)[idx]
            idx, act = idx[act > p.threshold], act[act > p.threshold]
            if len(idx) == 0:
                return []
            with single_threaded_blas():
                sim = col.cosine(idx, q)
            order = np.argsort(-sim)[:top_k]
            hits = [
                Hit(
                    chunk_id=self.index.ids[idx[j]],
                    activation=float(act[j]),
                    similarity=float(sim[j]),
                    score=float(sim[j]),
                )
                for j in order
            ]
        return self._with_chunks(hits)

    def _with_chunks(self, hits: list[Hit]) -> list[tuple[Hit, MemoryChunk]]:
        chunks = {c.id: c for c in self.store.get_chunks([h.chunk_id for h in hits], with_traces=False)}
        return [(h, chunks[h.chunk_id]) for h in hits if h.chunk_id in chunks]

    def _lexical_texts(self) -> tuple[list[int], list[str]]:
        idx, texts = [], []
        for chunk in self.store.chunks():
            i = self.index.pos.get(chunk.id)
            if i is not None:
                idx.append(i)
                texts.append(_lexical_text(chunk))
        return idx, texts

    # -- maintenance ------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Repair records without (all their) vectors: re-embedded. Vectors without a
        record are kept and named: a record written after its vectors and committed
        durably is gone only if memory.db lost it (an older copy put back, a power loss
        under non-durable commits), and they are the last trace of which answers were
        lost. They never reach retrieval (the index knows only recorded chunks)."""
        with self._lock:
            orphans = [(vid, cid) for vid, cid in self.vectors.ids() if cid not in self.index.pos]
            lost = sorted({cid for _, cid in orphans})
            if lost:
                log.warning(
                    "memory of %s: LOST RECORDS: %d chunk(s) have vectors but no record (kept): %s",
                    self.principal,
                    len(lost),
                    ", ".join(lost[:20]),
                )
            missing = 0
            for chunk in self.store.chunks(f"status NOT IN ({', '.join(repr(u) for u in UNINDEXED)})"):
                texts = chunk.vector_texts(self.params.blended_vectors)
                lacking = [d for d in texts if not self.index.has_vector(chunk.id, d)]
                if lacking:
                    vecs = dict(zip(lacking, self.embedder.embed([texts[d] for d in lacking])))
                    self.vectors.upsert(chunk.id, vecs)
                    for dim, vec in vecs.items():
                        self.index.set_vector(chunk.id, dim, vec)
                    missing += 1
        return ReconcileReport(missing_vectors=missing, orphan_vectors=len(orphans), lost_records=lost)

    def stats(self) -> MemoryStats:
        s = self.store
        by_context: dict[str, int] = {}
        for _, _, state, task_type, *_ in s.index_rows():
            key = f"{state}|{task_type}"
            by_context[key] = by_context.get(key, 0) + 1
        return MemoryStats(
            principal=self.principal,
            chunks=s.count(),
            human_answered=s.count("answered_by = 'human'"),
            proxy_answered=s.count("answered_by = 'proxy'"),
            traces=s.trace_count(),
            counter=s.counter(),
            memory_depth=s.memory_depth(),
            by_context=by_context,
            embedding_model=s.get_meta("embedding_model") or "",
        )


def _lexical_text(chunk: MemoryChunk) -> str:
    return " ".join(chunk.dimension_texts().values())


def _as_decided(chunk: MemoryChunk, d: StorageDecision) -> MemoryChunk:
    status = {"persist": "active", "buffer": "buffered", "reinforce": "merged", "drop": "dropped"}[d.op]
    return chunk.model_copy(update={"status": status, "superseded_by": d.nearest if d.op == "reinforce" else None})


def _fields(chunk: MemoryChunk) -> dict[str, str]:
    d = chunk.model_dump(include=set(STRUCT_FIELDS))
    d["kind"] = chunk.kind.value
    return d
