"""Lexical search with BM25 (bm25s): local Chroma has no sparse search, so Vicar keeps
its own and fuses it with dense results by reciprocal rank fusion.

bm25s has no incremental indexing. Chunks added since the last build form a tail that
is scored with the same BM25 formula (Lucene's, as bm25s uses) against document
frequencies kept here; the index is rebuilt when the tail outgrows a quarter of it, so
the rebuild cost stays amortized O(1) per chunk instead of a full rebuild per query.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable

import numpy as np

TextSource = Callable[[], tuple[list[int], list[str]]]  # -> (chunk indices, texts)
K1, B = 1.5, 0.75  # bm25s defaults


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's default token pattern


@functools.cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(texts: list[str]) -> list[list[str]]:
    """bm25s's tokenization (lowercase, its token pattern, its English stopwords), without
    its per-call overhead: queries and tail documents are tokenized one at a time, and
    their tokens must match the ones bm25s indexed (tested)."""
    stop = _stopwords()
    return [[t for t in _TOKEN.findall(text.lower()) if t not in stop] for text in texts]


class LexicalIndex:
    def __init__(self, source: TextSource) -> None:
        self._source = source
        self._retriever = None
        self._doc_chunk = np.zeros(0, dtype=np.int64)
        self._tail: list[tuple[int, int]] = []  # (chunk index, length) of chunks added since the build
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)  # term -> [(tail pos, tf)]
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
            pos = len(self._tail)
            self._tail.append((chunk_index, len(tokens)))
            for term, tf in counts.items():
                self._postings[term].append((pos, tf))
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
        self._postings = defaultdict(list)
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
            chunks: list[np.ndarray] = []
            scores: list[np.ndarray] = []
            if self._retriever is not None:
                k = min(depth, len(self._doc_chunk))
                docs, found = self._retriever.retrieve([query], k=k, show_progress=False)
                chunks.append(self._doc_chunk[docs[0]])
                scores.append(np.asarray(found[0], dtype=np.float64))
            tail = self._score_tail(query)
            if tail:
                chunks.append(np.fromiter((i for i, _ in tail), dtype=np.int64, count=len(tail)))
                scores.append(np.fromiter((x for _, x in tail), dtype=np.float64, count=len(tail)))
        if not chunks:
            return out
        chunk, score = np.concatenate(chunks), np.concatenate(scores)
        keep = (score > 0) & (chunk < n_chunks)
        chunk, score = chunk[keep], score[keep]
        order = np.argsort(-score, kind="stable")[:depth]
        out[chunk[order]] = np.arange(len(order))
        return out

    def _score_tail(self, query: list[str]) -> list[tuple[int, float]]:
        """BM25 of the tail documents that contain a query term (through the postings,
        so the cost follows the matches, not the tail's size)."""
        if not self._tail:
            return []
        avgdl = self._total_len / max(self._docs, 1)
        scores: dict[int, float] = defaultdict(float)
        for t, times in Counter(query).items():  # a repeated query term counts again, as in bm25s
            postings = self._postings.get(t)
            if not postings:
                continue
            idf = times * math.log(1 + (self._docs - self._df[t] + 0.5) / (self._df[t] + 0.5))
            for pos, tf in postings:
                length = self._tail[pos][1]
                scores[pos] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
        return [(self._tail[pos][0], s) for pos, s in scores.items()]
