"""Chunk vectors in ChromaDB: one persistent client per principal, one collection.

Every dimension of a chunk is one Chroma record with id `<chunk id>:<dimension>`, so a
chunk's vectors are written in one idempotent upsert (each upsert costs ~8 ms).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

logging.getLogger("chromadb.telemetry").setLevel(logging.CRITICAL)


def vector_id(chunk_id: str, dim: str) -> str:
    return f"{chunk_id}:{dim}"


class VectorStore:
    def __init__(self, path: Path) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        path.mkdir(parents=True, exist_ok=True)
        self._client = chromadb.PersistentClient(
            path=str(path), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        )
        # Chroma's default embedding function downloads a model: always pass vectors.
        self._col = self._client.get_or_create_collection(
            name="chunks", embedding_function=None, metadata={"hnsw:space": "cosine"}
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
            for meta, vec in zip(got["metadatas"], got["embeddings"]):
                yield meta["chunk_id"], meta["dim"], np.asarray(vec, dtype=np.float32)
            offset += len(got["ids"])

    def count(self) -> int:
        return self._col.count()
