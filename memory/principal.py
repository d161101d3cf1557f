"""One principal's memory: record store + vectors + in-process index, behind one API.

Each principal has its own directory, SQLite file, Chroma client and index: there is
no shared collection or table through which one principal's chunks could reach another.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from memory.chunk import MemoryChunk
from memory.embedder import Embedder
from memory.index import STRUCT_FIELDS, MemoryIndex
from memory.retrieval import Hit, Query, rank
from memory.store import RecordStore, StoreError
from memory.vectors import VectorStore
from vicar.config import MemoryParams
from vicar.models import check_principal


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


class PrincipalMemory:
    def __init__(self, principal: str, root: Path, embedder: Embedder, params: MemoryParams) -> None:
        self.principal = check_principal(principal)
        self.dir = root / principal
        self.embedder = embedder
        self.params = params
        self._lock = threading.RLock()
        self.store = RecordStore(self.dir / "memory.db")
        self._claim("principal", principal)
        self._claim("embedding_model", embedder.model_name)
        self.vectors = VectorStore(self.dir / "chroma")
        self.index = MemoryIndex(embedder.dim)
        self._rebuild()

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
        for chunk in self.store.chunks():
            self.index.add_chunk(chunk.id, _fields(chunk), chunk.traces)
        for cid, dim, vec in self.vectors.load_all():
            self.index.set_vector(cid, dim, vec)

    def close(self) -> None:
        self.store.close()

    # -- writes ---------------------------------------------------------------

    def record(self, chunk: MemoryChunk) -> bool:
        """Store a chunk and its vectors. Idempotent: a retry re-upserts the same vectors
        under the same id and adds no second record or trace. Returns True if new."""
        if chunk.principal != self.principal:
            raise StoreError(f"chunk of {chunk.principal!r} offered to memory of {self.principal!r}")
        texts = chunk.dimension_texts()
        vecs = self.embedder.embed(list(texts.values())) if texts else np.zeros((0, 0))
        with self._lock:
            # Vectors first: a crash between the two leaves vectors without a record,
            # which the retry (same id) completes, rather than a record without vectors.
            self.vectors.upsert(chunk.id, dict(zip(texts, vecs)))
            created = self.store.add_chunk(chunk)
            stored = chunk if created else self.store.get_chunk(chunk.id)
            self.index.add_chunk(chunk.id, _fields(stored), stored.traces)
            for dim, vec in zip(texts, vecs):
                self.index.set_vector(chunk.id, dim, vec)
        return created

    def reinforce(self, chunk_ids: list[str], n: int) -> list[str]:
        """ACT-R rule 2: a retrieval trace at N for chunks the proxy used; once per (chunk, N)."""
        with self._lock:
            added = self.store.add_traces(chunk_ids, n)
            for cid in added:
                self.index.add_trace(cid, n)
        return added

    def raise_counter(self, n: int) -> int:
        return self.store.raise_counter(n)

    def counter(self) -> int:
        return self.store.counter()

    # -- reads ----------------------------------------------------------------

    def retrieve(self, query: Query) -> list[tuple[Hit, MemoryChunk]]:
        texts = {d: t for d, t in query.texts.items() if t.strip()}
        qvecs = dict(zip(texts, self.embedder.embed(list(texts.values())))) if texts else {}
        p = self.params
        with self._lock:
            hits = rank(
                self.index, query, qvecs, decay=p.decay, threshold=p.threshold,
                age_floor=p.age_floor, w_activation=p.w_activation,
                w_similarity=p.w_similarity, top_k=p.top_k,
            )
        out = []
        for hit in hits:
            chunk = self.store.get_chunk(hit.chunk_id)
            if chunk is not None:
                out.append((hit, chunk))
        return out

    def stats(self) -> MemoryStats:
        s = self.store
        by_context: dict[str, int] = {}
        for chunk in s.chunks():
            key = f"{chunk.state}|{chunk.task_type}"
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


def _fields(chunk: MemoryChunk) -> dict[str, str]:
    d = chunk.model_dump(include=set(STRUCT_FIELDS))
    d["kind"] = chunk.kind.value
    return d


class MemoryRegistry:
    """The worker's open memories, one per principal, opened on first use."""

    def __init__(self, root: Path, embedder_factory, params: MemoryParams) -> None:
        self.root = root
        self._embedder_factory = embedder_factory
        self.params = params
        self._open: dict[str, PrincipalMemory] = {}
        self._lock = threading.Lock()

    def get(self, principal: str) -> PrincipalMemory:
        check_principal(principal)
        with self._lock:
            mem = self._open.get(principal)
            if mem is None:
                mem = PrincipalMemory(principal, self.root, self._embedder_factory(), self.params)
                self._open[principal] = mem
            return mem

    def close(self) -> None:
        with self._lock:
            for mem in self._open.values():
                mem.close()
            self._open.clear()
