"""Lexical search with BM25 (bm25s): local Chroma has no sparse search, so Vicar keeps
its own and fuses it with dense results by reciprocal rank fusion.

bm25s has no incremental indexing. Chunks added since the last build form a tail that
is scored with the same BM25 formula (Lucene's, as bm25s uses) against document
frequencies kept here; the index is rebuilt when the tail outgrows a quarter of it, so
the rebuild cost stays amortized O(1) per chunk instead of a full rebuild per query.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable

import numpy as np

TextSource = Callable[[], tuple[list[int], list[str]]]  # -> (chunk indices, texts)
K1, B = 1.5, 0.75  # bm25s defaults


def tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


class LexicalIndex:
    def __init__(self, source: TextSource) -> None:
        self._source = source
        self._retriever = None
        self._doc_chunk = np.zeros(0, dtype=np.int64)
        self._tail: list[tuple[int, Counter[str], int]] = []  # (chunk index, term counts, length)
        self._df: Counter[str] = Counter()
        self._docs = 0
        self._total_len = 0
        self._built = False
        self._lock = threading.Lock()

    def add(self, chunk_index: int, text: str) -> None:
        with self._lock:
            if not self._built:
                return  # the first query builds from the store, which includes it
            [tokens] = tokenize([text])
            counts = Counter(tokens)
            self._tail.append((chunk_index, counts, len(tokens)))
            self._df.update(counts.keys())
            self._docs += 1
            self._total_len += len(tokens)

    def invalidate(self) -> None:
        """A chunk's text changed (consolidation's UPDATE): rebuild on the next query."""
        with self._lock:
            self._built = False

    def _rebuild(self) -> None:
        import bm25s

        chunk_idx, texts = self._source()
        self._doc_chunk = np.asarray(chunk_idx, dtype=np.int64)
        tokens = tokenize(texts)
        self._df = Counter(t for doc in tokens for t in set(doc))
        self._docs = len(tokens)
        self._total_len = sum(len(d) for d in tokens)
        self._tail = []
        self._retriever = None
        if texts:
            retriever = bm25s.BM25(k1=K1, b=B)
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            self._retriever = retriever
        self._built = True

    def ranks(self, text: str, n_chunks: int, depth: int = 1000) -> np.ndarray:
        """BM25 rank (0 = best) of each chunk index for `text`; -1 where it did not match."""
        out = np.full(n_chunks, -1, dtype=np.int64)
        with self._lock:
            if not self._built or len(self._tail) > max(64, len(self._doc_chunk) // 4):
                self._rebuild()
            [query] = tokenize([text])
            if not query:
                return out
            scored: list[tuple[float, int]] = []
            if self._retriever is not None:
                k = min(depth, len(self._doc_chunk))
                docs, scores = self._retriever.retrieve([query], k=k, show_progress=False)
                scored += [(float(s), int(self._doc_chunk[d])) for d, s in zip(docs[0], scores[0]) if s > 0]
            scored += [(s, i) for i, s in self._score_tail(query) if s > 0]
        scored.sort(key=lambda x: -x[0])
        for rank, (_, i) in enumerate(scored[:depth]):
            if i < n_chunks:
                out[i] = rank
        return out

    def _score_tail(self, query: list[str]) -> list[tuple[int, float]]:
        if not self._tail:
            return []
        avgdl = self._total_len / max(self._docs, 1)
        idf = {t: math.log(1 + (self._docs - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in set(query)}
        out = []
        for i, counts, length in self._tail:
            s = 0.0
            for t in query:
                tf = counts.get(t, 0)
                if tf:
                    s += idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
            out.append((i, s))
        return out
