"""Chunk vectors in ChromaDB: one persistent client per principal, one collection per dimension."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from memory.chunk import DIMENSIONS

logging.getLogger("chromadb.telemetry").setLevel(logging.CRITICAL)


class VectorStore:
    def __init__(self, path: Path) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        path.mkdir(parents=True, exist_ok=True)
        self._client = chromadb.PersistentClient(
            path=str(path), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        )
        # Chroma's default embedding function downloads a model: always pass vectors.
        self._collections = {
            dim: self._client.get_or_create_collection(
                name=f"chunks-{dim}", embedding_function=None, metadata={"hnsw:space": "cosine"}
            )
            for dim in DIMENSIONS
        }
        self._lock = threading.Lock()

    def upsert(self, dim: str, ids: list[str], vectors: np.ndarray) -> None:
        if not ids:
            return
        with self._lock:
            self._collections[dim].upsert(ids=ids, embeddings=vectors)

    def load_all(self, dim: str) -> tuple[list[str], np.ndarray]:
        """Every id and vector of one dimension, paged so memory stays bounded per call."""
        col = self._collections[dim]
        ids: list[str] = []
        parts: list[np.ndarray] = []
        page, offset = 5000, 0
        with self._lock:
            while True:
                got = col.get(include=["embeddings"], limit=page, offset=offset)
                if not got["ids"]:
                    break
                ids.extend(got["ids"])
                parts.append(np.asarray(got["embeddings"], dtype=np.float32))
                offset += len(got["ids"])
        vecs = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        return ids, vecs

    def count(self, dim: str) -> int:
        return self._collections[dim].count()
