"""One BLAS thread while retrieval multiplies: a counted limit, cheap to enter.

Retrieval's matrix-vector products are too small for a thread team: on 2 cores one
thread was 2.5-4x faster (bench/MEMORY_RESULTS.md). threadpoolctl's `limit()` inspects
every loaded library at each entry (~0.5 ms, several times per gate); here the BLAS
libraries are found once and their thread count is set directly (two C calls). The
limit is counted: threads that retrieve at once share it, the first in sets one thread,
the last out restores what there was (nested or overlapping entries never restore a
count another entry set).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_libs: list[Any] | None = None  # threadpoolctl's controllers of the loaded BLAS libraries
_depth = 0
_saved: list[int] = []


def _blas_libs() -> list[Any]:
    global _libs
    if _libs is None:
        from threadpoolctl import ThreadpoolController

        _libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libs


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """A context in which BLAS uses one thread (the same numbers as threadpoolctl's
    `limit(limits=1, user_api="blas")`, which this replaces)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            libs = _blas_libs()
            _saved = [lib.get_num_threads() for lib in libs]
            for lib in libs:
                lib.set_num_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for lib, n in zip(_blas_libs(), _saved):
                    lib.set_num_threads(n)
