"""Chunk vectors are written behind the record (memory/vectors.py): Chroma's upsert
holds the GIL for its whole run, whatever its size, so answers' vectors are grouped into
one upsert, written within FLUSH_SECONDS; the record itself is durable at once, and a
crash before the write leaves records re-embedded when the memory opens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import vicar.memory.vectors as vectors_module
from tests.test_broken_store import chunk
from vicar.memory.params import MemoryParams
from vicar.memory.principal import PrincipalMemory

ROOT = Path(__file__).resolve().parent.parent


def counting_upserts(mem: PrincipalMemory) -> list[int]:
    """Chroma upsert calls of this memory's collection (the number of ids each)."""
    calls: list[int] = []
    assert isinstance(mem.vectors, vectors_module.VectorStore)
    col = mem.vectors._col
    real = col.upsert

    def upsert(*args, **kwargs):
        calls.append(len(kwargs["ids"]))
        return real(*args, **kwargs)

    col.upsert = upsert  # type: ignore[method-assign]
    return calls


def indexed(mem: PrincipalMemory, i: int) -> bool:
    dims = chunk("alice", i).vector_texts(mem.params.blended_vectors)
    return bool(dims) and all(mem.index.has_vector(f"c{i}", d) for d in dims)


def test_answers_vectors_are_written_in_one_upsert_and_soon(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    calls = counting_upserts(mem)
    for i in range(1, 6):
        mem.record(chunk("alice", i))
    assert calls == [], "an answer's record waited for a Chroma write"
    assert mem.store.count() == 5  # the records are in memory.db at once
    assert indexed(mem, 3), "the in-memory index has the vectors before Chroma does"
    deadline = time.monotonic() + vectors_module.FLUSH_SECONDS + 10
    while not calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(calls) == 1 and calls[0] >= 5, calls  # every dimension of the 5 chunks, one upsert
    assert mem.vectors.count() == calls[0]
    mem.close()


def test_close_writes_what_is_pending(settings, embedder, monkeypatch):
    monkeypatch.setattr(vectors_module, "FLUSH_SECONDS", 3600.0)
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    for i in range(1, 4):
        mem.record(chunk("alice", i))
    mem.close()
    again = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    assert again.rebuilt_on_open is None  # every vector was in Chroma
    assert again.chunks_without_vectors() == 0
    again.close()


DIES_BEFORE_THE_WRITE = """
import os, sys
from pathlib import Path
import vicar.memory.vectors as vectors_module
vectors_module.FLUSH_SECONDS = 3600.0
from vicar.memory.embedder import default_embedder
from vicar.memory.principal import PrincipalMemory
from vicar.memory.params import MemoryParams
from tests.test_broken_store import chunk

mem = PrincipalMemory("alice", Path(sys.argv[1]), default_embedder(), MemoryParams())
for i in (1, 2, 3):
    mem.record(chunk("alice", i))
os._exit(0)  # a crash: the vectors were still pending
"""


def test_a_crash_before_the_write_loses_no_answer(settings, embedder):
    subprocess.run(
        [sys.executable, "-c", DIES_BEFORE_THE_WRITE, str(settings.principals_dir)],
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
        timeout=120,
    )
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    assert mem.store.count() == 3  # the answers
    assert mem.rebuilt_on_open is not None and mem.rebuilt_on_open.missing_vectors == 3
    assert mem.chunks_without_vectors() == 0
    assert all(indexed(mem, i) for i in (1, 2, 3))
    mem.close()
