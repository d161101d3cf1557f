"""In-process index of one principal's memory: structural codes, traces and vectors as
numpy arrays, so activation and similarity are computed for all chunks at once.

Rebuilt from the store and Chroma on open; updated incrementally on every write.
Structural filtering happens here on integer codes, not through Chroma's metadata
filter (a full scan, 65-110 ms at 100k chunks).
"""

from __future__ import annotations

import numpy as np

from vicar.memory.activation import base_levels, hybrid_levels
from vicar.memory.blas import single_threaded_blas

STRUCT_FIELDS = ("kind", "state", "task_type", "outcome", "answered_by", "status")
ANY = "any"

__all__ = ["ANY", "STRUCT_FIELDS", "Growable", "MemoryIndex", "VectorColumn", "single_threaded_blas"]


class Growable:
    """A numpy array with amortized O(1) append along axis 0."""

    def __init__(self, dtype, width: int | None = None, fill=0) -> None:
        self._fill = fill
        shape = (64,) if width is None else (64, width)
        self._data = np.full(shape, fill, dtype=dtype)
        self.size = 0

    def reserve(self, n: int) -> None:
        if n > len(self._data):
            cap = max(n, 2 * len(self._data))
            grown = np.full((cap, *self._data.shape[1:]), self._fill, dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown

    def append(self, value) -> int:
        self.reserve(self.size + 1)
        self._data[self.size] = value
        self.size += 1
        return self.size - 1

    def extend(self, values: np.ndarray) -> None:
        self.reserve(self.size + len(values))
        self._data[self.size : self.size + len(values)] = values
        self.size += len(values)

    @property
    def view(self) -> np.ndarray:
        return self._data[: self.size]

    @property
    def nbytes(self) -> int:
        return self._data.nbytes


class VectorColumn:
    """One embedding dimension, stored compactly: rows only for chunks that have it."""

    def __init__(self, dim: int) -> None:
        self.rows = Growable(np.float32, dim)
        self.row_of = Growable(np.int64, fill=-1)  # chunk index -> row, -1 when absent
        # The last whole-column product (the query's bytes, the column's version, the
        # product): a gate's searches ask the same column with the same query vector up
        # to three times (both passes, similar work, support). Any write changes the version.
        self._version = 0
        self._product: tuple[bytes, int, np.ndarray] | None = None

    def grow_to(self, n_chunks: int) -> None:
        while self.row_of.size < n_chunks:
            self.row_of.append(-1)

    def set(self, i: int, vec: np.ndarray) -> None:
        self._version += 1
        self.grow_to(i + 1)
        r = self.row_of.view[i]
        if r >= 0:
            self.rows.view[r] = vec
        else:
            self.row_of.view[i] = self.rows.append(vec)

    def has(self, idx: np.ndarray) -> np.ndarray:
        return self.row_of.view[idx] >= 0

    def get(self, i: int) -> np.ndarray | None:
        if i >= self.row_of.size or self.row_of.view[i] < 0:
            return None
        return self.rows.view[self.row_of.view[i]].copy()

    def cosine(self, idx: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosine (vectors are unit-normalized) for chunks idx; NaN where absent."""
        q = q.astype(self.rows.view.dtype, copy=False)  # a float64 query would upcast the column
        rows = self.row_of.view[idx]
        present = rows >= 0
        out = np.full(len(idx), np.nan)
        if not present.any():
            return out
        # Multiplying the whole column and picking is cheaper than gathering many rows.
        if present.sum() * 4 > self.rows.size:
            out[present] = self.column_product(q)[rows[present]]
        else:
            out[present] = self.rows.view[rows[present]] @ q
        return out

    def column_product(self, q: np.ndarray) -> np.ndarray:
        """rows @ q over the whole column, the last one kept. Kept, not recomputed: the
        same numbers (BLAS's result for a row depends on where it falls in the matrix,
        so a product over other rows would not do)."""
        key = q.tobytes()
        last = self._product
        if last is not None and last[1] == self._version and last[0] == key:
            return last[2]
        product = self.rows.view @ q
        product.setflags(write=False)  # shared with later callers
        self._product = (key, self._version, product)
        return product


class MemoryIndex:
    def __init__(self, dim: int, hybrid_k: int = 3) -> None:
        self.dim = dim
        self.k = hybrid_k
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self._codes: dict[str, dict[str, int]] = {f: {} for f in STRUCT_FIELDS}
        self._fields = {f: Growable(np.int32) for f in STRUCT_FIELDS}
        # Exact activation needs every trace ...
        self._trace_owner = Growable(np.int64)
        self._trace_n = Growable(np.int64)
        # ... Petrov's hybrid only the k most recent, the count and the creation.
        self._recent = Growable(np.int64, hybrid_k, fill=-1)
        self._count = Growable(np.int64)
        self._created = Growable(np.int64)
        self._last = Growable(np.int64)  # most recent trace: the recency-N baseline
        self.vectors: dict[str, VectorColumn] = {}
        self.coaccess: dict[int, dict[int, int]] = {}
        # A gate retrieves twice (prior, posterior) at one N: the second reuses the first's
        # activations. Any new chunk or trace invalidates them.
        self._act_cache: tuple[tuple, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def _code(self, field: str, value: str) -> int:
        codes = self._codes[field]
        if value not in codes:
            codes[value] = len(codes)
        return codes[value]

    # -- writes ---------------------------------------------------------------

    def add_chunk(self, chunk_id: str, fields: dict[str, str], traces: list[int]) -> int:
        if chunk_id in self.pos:
            return self.pos[chunk_id]
        i = len(self.ids)
        self._act_cache = None
        self.ids.append(chunk_id)
        self.pos[chunk_id] = i
        for f in STRUCT_FIELDS:
            self._fields[f].append(self._code(f, fields[f]))
        ordered = sorted(traces)
        self._created.append(ordered[0] if ordered else 0)
        self._count.append(0)
        self._last.append(-1)
        self._recent.append(np.full(self.k, -1))
        for n in ordered:
            self.add_trace(chunk_id, n)
        return i

    def field_value(self, i: int, field: str) -> str:
        code = int(self._fields[field].view[i])
        return next(v for v, c in self._codes[field].items() if c == code)

    def set_field(self, chunk_id: str, field: str, value: str) -> None:
        self._fields[field].view[self.pos[chunk_id]] = self._code(field, value)

    def add_trace(self, chunk_id: str, n: int) -> None:
        """Callers add each (chunk, N) once: the store reports which traces are new."""
        self._act_cache = None
        i = self.pos[chunk_id]
        self._trace_owner.append(i)
        self._trace_n.append(n)
        self._count.view[i] += 1
        recent = self._recent.view[i]
        # Keep the k largest trace numbers, newest last.
        if recent[0] < n:
            recent[0] = n
            recent.sort()
        self._last.view[i] = max(self._last.view[i], n)

    def set_vector(self, chunk_id: str, dim: str, vec: np.ndarray) -> None:
        i = self.pos.get(chunk_id)
        if i is None:
            return  # a vector whose record is missing: reconcile's business, not retrieval's
        col = self.vectors.get(dim)
        if col is None:
            col = self.vectors[dim] = VectorColumn(self.dim)
        col.set(i, vec)

    def add_coaccess(self, chunk_ids: list[str]) -> None:
        idx = [self.pos[c] for c in chunk_ids if c in self.pos]
        for a in idx:
            row = self.coaccess.setdefault(a, {})
            for b in idx:
                if a != b:
                    row[b] = row.get(b, 0) + 1

    # -- reads ----------------------------------------------------------------

    def vectors_of(self, chunk_id: str, dims: tuple[str, ...]) -> dict[str, np.ndarray]:
        """A chunk's own vectors, to use it as a query (consolidation's neighbours)."""
        i = self.pos[chunk_id]
        out = {}
        for dim in dims:
            col = self.vectors.get(dim)
            vec = col.get(i) if col is not None else None
            if vec is not None:
                out[dim] = vec
        return out

    def has_vector(self, chunk_id: str, dim: str) -> bool:
        i = self.pos.get(chunk_id)
        col = self.vectors.get(dim)
        return i is not None and col is not None and i < col.row_of.size and col.row_of.view[i] >= 0

    def candidates(self, filters: dict[str, str | list[str] | None]) -> np.ndarray:
        """Indices of chunks matching every given structural field (None or 'any' = any;
        a list: any of its values)."""
        mask = np.ones(len(self.ids), dtype=bool)
        for field, value in filters.items():
            if value is None or value == ANY:
                continue
            if field not in self._codes:
                raise ValueError(f"cannot filter on {field!r}; fields: {', '.join(STRUCT_FIELDS)}")
            values = value if isinstance(value, list) else [value]
            codes = [c for c in (self._codes[field].get(v) for v in values) if c is not None]
            if not codes:
                return np.zeros(0, dtype=np.int64)
            column = self._fields[field].view
            if len(codes) == 1:
                mask &= column == codes[0]
            else:
                # A table of the field's codes (a handful) instead of np.isin's sort.
                wanted = np.zeros(len(self._codes[field]), dtype=bool)
                wanted[codes] = True
                mask &= wanted[column]
        return np.flatnonzero(mask)

    def activations(self, now: int, decay: float, age_floor: float, mode: str = "exact") -> np.ndarray:
        key = (now, decay, age_floor, mode, len(self.ids))
        if self._act_cache is not None and self._act_cache[0] == key:
            return self._act_cache[1]
        if mode == "hybrid":
            act = hybrid_levels(self._recent.view, self._count.view, self._created.view, now, decay, age_floor)
        else:
            act = base_levels(self._trace_owner.view, self._trace_n.view, len(self.ids), now, decay, age_floor)
        act.setflags(write=False)  # shared with later callers: nobody may change it
        self._act_cache = (key, act)
        return act

    def last_trace(self, idx: np.ndarray) -> np.ndarray:
        return self._last.view[idx]

    def similarity(self, idx: np.ndarray, query: dict[str, np.ndarray]) -> np.ndarray:
        """Mean cosine over the dimensions present on both sides; NaN where none is.

        A dimension a chunk lacks is left out of its mean rather than counted as zero."""
        total = np.zeros(len(idx))
        count = np.zeros(len(idx))
        for dim, q in query.items():
            col = self.vectors.get(dim)
            if col is None:
                continue
            col.grow_to(len(self.ids))
            cos = col.cosine(idx, q)
            present = ~np.isnan(cos)
            total[present] += cos[present]
            count += present
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def spread(self, seeds: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Co-access association from the seed chunks to each of idx: for each seed, the
        share of its co-retrievals spent on that chunk (ACT-R's fan: a seed used with
        many chunks spreads less to each)."""
        out = np.zeros(len(idx))
        where = {int(j): p for p, j in enumerate(idx)}
        for s in seeds:
            row = self.coaccess.get(int(s))
            if not row:
                continue
            fan = sum(row.values())
            for j, n in row.items():
                p = where.get(j)
                if p is not None:
                    out[p] += n / fan
        return out

    def nbytes(self) -> int:
        arrays = [
            *self._fields.values(),
            self._trace_owner,
            self._trace_n,
            self._recent,
            self._count,
            self._created,
            self._last,
        ]
        total = sum(a.nbytes for a in arrays)
        total += sum(c.rows.nbytes + c.row_of.nbytes for c in self.vectors.values())
        return total
