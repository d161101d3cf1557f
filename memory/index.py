"""In-process index of one principal's memory: structural codes, traces and vectors as
numpy arrays, so activation and similarity are computed for all chunks at once.

Rebuilt from the store and Chroma on open; updated incrementally on every write.
"""

from __future__ import annotations

import numpy as np

from memory.activation import base_levels
from memory.chunk import DIMENSIONS

STRUCT_FIELDS = ("kind", "state", "task_type", "outcome", "answered_by")


class _Growable:
    """A numpy array with amortized O(1) append along axis 0."""

    def __init__(self, dtype, width: int | None = None) -> None:
        shape = (64,) if width is None else (64, width)
        self._data = np.zeros(shape, dtype=dtype)
        self.size = 0

    def _reserve(self, n: int) -> None:
        if n > len(self._data):
            cap = max(n, 2 * len(self._data))
            grown = np.zeros((cap, *self._data.shape[1:]), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown

    def append(self, value) -> None:
        self._reserve(self.size + 1)
        self._data[self.size] = value
        self.size += 1

    def set(self, i: int, value) -> None:
        self._data[i] = value

    @property
    def view(self) -> np.ndarray:
        return self._data[: self.size]


class MemoryIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self._codes: dict[str, dict[str, int]] = {f: {} for f in STRUCT_FIELDS}
        self._fields = {f: _Growable(np.int32) for f in STRUCT_FIELDS}
        self._trace_owner = _Growable(np.int64)
        self._trace_n = _Growable(np.int64)
        self._traces_seen: set[tuple[int, int]] = set()
        self._vecs = {d: _Growable(np.float32, dim) for d in DIMENSIONS}
        self._has = {d: _Growable(np.bool_) for d in DIMENSIONS}

    def __len__(self) -> int:
        return len(self.ids)

    def _code(self, field: str, value: str) -> int:
        codes = self._codes[field]
        if value not in codes:
            codes[value] = len(codes)
        return codes[value]

    def add_chunk(self, chunk_id: str, fields: dict[str, str], traces: list[int]) -> int:
        if chunk_id in self.pos:
            return self.pos[chunk_id]
        i = len(self.ids)
        self.ids.append(chunk_id)
        self.pos[chunk_id] = i
        for f in STRUCT_FIELDS:
            self._fields[f].append(self._code(f, fields[f]))
        for d in DIMENSIONS:
            self._vecs[d].append(np.zeros(self.dim, dtype=np.float32))
            self._has[d].append(False)
        for n in traces:
            self.add_trace(chunk_id, n)
        return i

    def add_trace(self, chunk_id: str, n: int) -> None:
        i = self.pos[chunk_id]
        if (i, n) in self._traces_seen:
            return
        self._traces_seen.add((i, n))
        self._trace_owner.append(i)
        self._trace_n.append(n)

    def set_vector(self, chunk_id: str, dim: str, vec: np.ndarray) -> None:
        i = self.pos.get(chunk_id)
        if i is None:
            return  # a vector whose record is missing: reconcile's business, not retrieval's
        self._vecs[dim].set(i, vec)
        self._has[dim].set(i, True)

    def has_vector(self, chunk_id: str, dim: str) -> bool:
        i = self.pos.get(chunk_id)
        return i is not None and bool(self._has[dim].view[i])

    def candidates(self, filters: dict[str, str | None]) -> np.ndarray:
        """Indices of chunks matching every given structural field (None = any)."""
        mask = np.ones(len(self.ids), dtype=bool)
        for field, value in filters.items():
            if value is None:
                continue
            code = self._codes[field].get(value)
            if code is None:
                return np.zeros(0, dtype=np.int64)
            mask &= self._fields[field].view == code
        return np.flatnonzero(mask)

    def activations(self, now: int, decay: float, age_floor: float) -> np.ndarray:
        return base_levels(
            self._trace_owner.view, self._trace_n.view, len(self.ids), now, decay, age_floor
        )

    def similarity(self, idx: np.ndarray, query: dict[str, np.ndarray]) -> np.ndarray:
        """Mean cosine over the dimensions present on both sides; NaN where none is.

        Vectors are unit-normalized, so a dot product is the cosine. A dimension a chunk
        lacks is left out of its mean rather than counted as zero similarity.
        """
        total = np.zeros(len(idx))
        count = np.zeros(len(idx))
        for dim, q in query.items():
            has = self._has[dim].view[idx]
            total += np.where(has, self._vecs[dim].view[idx] @ q, 0.0)
            count += has
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)
