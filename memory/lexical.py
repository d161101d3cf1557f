"""Lexical search with BM25 (bm25s): local Chroma has no sparse search, so Vicar keeps
its own and fuses it with dense results by reciprocal rank fusion."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

TextSource = Callable[[], tuple[list[int], list[str]]]  # -> (chunk indices, texts)


class LexicalIndex:
    """Rebuilt lazily, on the first lexical query after chunks were added: bm25s has no
    incremental indexing. A rebuild costs about a second per 100k short chunks."""

    def __init__(self, source: TextSource) -> None:
        self._source = source
        self._retriever = None
        self._doc_chunk = np.zeros(0, dtype=np.int64)
        self._stale = True
        self._lock = threading.Lock()

    def mark_stale(self) -> None:
        self._stale = True

    def _rebuild(self) -> None:
        import bm25s

        chunk_idx, texts = self._source()
        self._doc_chunk = np.asarray(chunk_idx, dtype=np.int64)
        if texts:
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            self._retriever = retriever
        else:
            self._retriever = None
        self._stale = False

    def ranks(self, text: str, n_chunks: int, depth: int = 1000) -> np.ndarray:
        """BM25 rank (0 = best) of each chunk index for `text`; -1 where it did not match."""
        import bm25s

        out = np.full(n_chunks, -1, dtype=np.int64)
        with self._lock:
            if self._stale:
                self._rebuild()
            if self._retriever is None or not text.strip():
                return out
            tokens = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)
            k = min(depth, len(self._doc_chunk))
            docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        matched = scores[0] > 0
        hits = self._doc_chunk[docs[0][matched]]
        keep = hits < n_chunks
        out[hits[keep]] = np.arange(matched.sum())[keep]
        return out
