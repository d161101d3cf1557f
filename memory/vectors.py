"""Chunk vectors in ChromaDB: one persistent client per principal, one collection per
embedding model.

Every dimension of a chunk is one Chroma record with id `<chunk id>:<dimension>`, so a
chunk's vectors are written in one idempotent upsert (each upsert costs ~8 ms). A
collection per model lets `vicar memory reembed` build the new vectors beside the old
ones and switch only when it is done.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import numpy as np

from vicar.memory.store import StoreError

logging.getLogger("chromadb.telemetry").setLevel(logging.CRITICAL)


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
        self._lock = threading.Lock()

    def upsert(self, chunk_id: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        dims = list(vectors)
        with self._lock:
            self._col.upsert(
                ids=[vector_id(chunk_id, d) for d in dims],
                embeddings=np.stack([vectors[d] for d in dims]),
                metadatas=[{"chunk_id": chunk_id, "dim": d} for d in dims],
            )

    def load_all(self, page: int = 5000):
        """Yield (chunk_id, dim, vector) for every stored vector, a page at a time."""
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
                self._col.delete(ids=vector_ids)

    def drop_other_models(self, keep_model: str) -> list[str]:
        """Delete the collections of other embedding models (after a re-embed)."""
        keep = collection_name(keep_model)
        dropped = []
        for col in self._client.list_collections():
            name: str = getattr(col, "name", col)  # type: ignore[arg-type]  # older Chroma listed names
            if name != keep and name.startswith("chunks-"):
                self._client.delete_collection(name)
                dropped.append(name)
        return dropped

    def count(self) -> int:
        return self._col.count()

    def close(self) -> None:
        # Chroma caches one client system per path for the whole process: without this, a
        # chroma/ deleted or moved aside would be read through the stale system when the
        # memory is opened again in the same process.
        with self._lock:
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
