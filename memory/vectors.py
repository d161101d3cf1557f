"""Chunk vectors in ChromaDB: one persistent client per principal, one collection per
embedding model.

Every dimension of a chunk is one Chroma record with id `<chunk id>:<dimension>`, so a
chunk's vectors are written in one idempotent upsert. A collection per model lets
`vicar memory reembed` build the new vectors beside the old ones and switch only when it
is done.

Writes are grouped (write-behind): Chroma's Rust bindings hold the GIL through a whole
upsert (chroma-core/chroma#3873 freed it for reads only), 5 ms on a quiet machine and
30-40 ms on a loaded one, whatever the batch's size, so a worker's every thread, its
event loop included, stopped for it at every recorded answer (bench/GATE_COSTS.md).
Vectors are derived data: the record in memory.db (fsync'd) is the answer, and a chunk
whose vectors a crash lost is re-embedded when its memory opens
(PrincipalMemory.chunks_without_vectors, reconcile). Retrieval never reads Chroma
after the open (the in-memory index has the vectors at once).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import numpy as np

from vicar.memory.store import StoreError

logging.getLogger("chromadb.telemetry").setLevel(logging.CRITICAL)
log = logging.getLogger("vicar.memory.vectors")

# Pending vectors are written at most this long after the first of them, or at once
# when this many chunks wait: a crash loses at most that, re-embedded at the next open.
FLUSH_SECONDS = 1.0
FLUSH_CHUNKS = 64


class VectorsUnusable(StoreError):
    """The vector store cannot be read: rebuilt from the records by `vicar memory repair`."""


def vectors_unusable(directory: Path, principal: str, exc: BaseException) -> StoreError:
    """The one line for a vector store that cannot be read: which file, and the repair."""
    cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return VectorsUnusable(
        f"vector store {directory / 'chroma' / 'chroma.sqlite3'} of {principal!r} is unusable "
        f"({cause}); rebuild it from the records with `vicar memory repair {principal}`"
    )


def open_vectors(directory: Path, principal: str, model: str) -> "VectorStore":
    try:
        return VectorStore(directory / "chroma", model)
    except Exception as exc:  # Chroma's errors have no common base across its Rust and Python layers
        raise vectors_unusable(directory, principal, exc) from exc


def vector_id(chunk_id: str, dim: str) -> str:
    return f"{chunk_id}:{dim}"


def collection_name(model: str) -> str:
    return "chunks-" + (re.sub(r"[^a-zA-Z0-9]+", "-", model).strip("-").lower() or "default")


class VectorStore:
    def __init__(self, path: Path, model: str) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        path.mkdir(parents=True, exist_ok=True)
        try:
            self._client = chromadb.PersistentClient(
                path=str(path), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False)
            )
        except Exception:
            # Chroma caches the system it failed to start, per path, for the whole process:
            # every later open of this path (even once repaired) would fail the same way.
            from chromadb.api.shared_system_client import SharedSystemClient

            SharedSystemClient._identifier_to_system.pop(str(path), None)
            raise
        # Chroma's default embedding function downloads a model: always pass vectors.
        self._col = self._client.get_or_create_collection(
            name=collection_name(model), embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        self._lock = threading.RLock()
        # vector id -> (chunk id, dim, vector), in the order written; a rewrite replaces.
        self._pending: dict[str, tuple[str, str, np.ndarray]] = {}
        self._timer: threading.Timer | None = None

    def upsert(self, chunk_id: str, vectors: dict[str, np.ndarray]) -> None:
        """Queued, written within FLUSH_SECONDS (see the module's note)."""
        if not vectors:
            return
        with self._lock:
            for d, vec in vectors.items():
                self._pending[vector_id(chunk_id, d)] = (chunk_id, d, vec)
            chunks = len({cid for cid, _, _ in self._pending.values()})
            if chunks >= FLUSH_CHUNKS:
                self.flush()
            elif self._timer is None:
                self._timer = threading.Timer(FLUSH_SECONDS, self._flush_later)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write the pending vectors in one upsert. Raises what Chroma raises; they stay
        pending then."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._pending:
                return
            ids = list(self._pending)
            rows = list(self._pending.values())
            self._col.upsert(
                ids=ids,
                embeddings=np.stack([vec for _, _, vec in rows]),
                metadatas=[{"chunk_id": cid, "dim": d} for cid, d, _ in rows],
            )
            self._pending.clear()

    def _flush_later(self) -> None:
        t0 = time.perf_counter()
        try:
            self.flush()
        except Exception as exc:  # Chroma's errors have no common base; the next flush retries
            log.warning("vectors not written yet (%s); retried at the next write or close", exc)
        else:
            log.debug("vectors written in %.1f ms", (time.perf_counter() - t0) * 1000)

    def load_all(self, page: int = 5000):
        """Yield (chunk_id, dim, vector) for every stored vector, a page at a time."""
        self.flush()
        offset = 0
        while True:
            with self._lock:
                got = self._col.get(include=["embeddings", "metadatas"], limit=page, offset=offset)
            if not got["ids"]:
                return
            # Both were asked for in include=, so neither is None.
            for meta, vec in zip(got["metadatas"], got["embeddings"]):  # type: ignore[arg-type]
                yield meta["chunk_id"], meta["dim"], np.asarray(vec, dtype=np.float32)
            offset += len(got["ids"])

    def ids(self, page: int = 20000) -> list[tuple[str, str]]:
        """(vector id, chunk id) of every stored vector."""
        self.flush()
        out: list[tuple[str, str]] = []
        offset = 0
        while True:
            with self._lock:
                got = self._col.get(include=["metadatas"], limit=page, offset=offset)
            if not got["ids"]:
                return out
            out.extend((vid, str(meta["chunk_id"])) for vid, meta in zip(got["ids"], got["metadatas"]))  # type: ignore[arg-type]  # included
            offset += len(got["ids"])

    def delete(self, vector_ids: list[str]) -> None:
        if vector_ids:
            with self._lock:
                self.flush()
                self._col.delete(ids=vector_ids)

    def drop_other_models(self, keep_model: str) -> list[str]:
        """Delete the collections of other embedding models (after a re-embed)."""
        self.flush()
        keep = collection_name(keep_model)
        dropped = []
        for col in self._client.list_collections():
            name: str = getattr(col, "name", col)  # type: ignore[arg-type]  # older Chroma listed names
            if name != keep and name.startswith("chunks-"):
                self._client.delete_collection(name)
                dropped.append(name)
        return dropped

    def count(self) -> int:
        self.flush()
        return self._col.count()

    def close(self) -> None:
        # Chroma caches one client system per path for the whole process: without this, a
        # chroma/ deleted or moved aside would be read through the stale system when the
        # memory is opened again in the same process.
        with self._lock:
            try:
                self.flush()
            except Exception as exc:  # the records are in memory.db: the next open re-embeds
                log.warning("vectors not written at close (%s); re-embedded when the memory opens", exc)
            self._client.close()  # type: ignore[attr-defined]  # Chroma's client has it; its ClientAPI type does not


class InMemoryVectors:
    """VectorStore's interface without persistence, for throwaway memories."""

    def __init__(self) -> None:
        self._vecs: dict[str, tuple[str, str, np.ndarray]] = {}

    def upsert(self, chunk_id: str, vectors: dict[str, np.ndarray]) -> None:
        for dim, vec in vectors.items():
            self._vecs[vector_id(chunk_id, dim)] = (chunk_id, dim, vec)

    def load_all(self, page: int = 0):
        yield from self._vecs.values()

    def ids(self) -> list[tuple[str, str]]:
        return [(vid, cid) for vid, (cid, _, _) in self._vecs.items()]

    def delete(self, vector_ids: list[str]) -> None:
        for vid in vector_ids:
            self._vecs.pop(vid, None)

    def count(self) -> int:
        return len(self._vecs)
