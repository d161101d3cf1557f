"""The memory's work per gate where the replay waits (issue 49, item 1): the newest human
answers of a context come from an index walk, not a sort of every answer; a gate's
searches reuse a column's product with the same query vector (the same numbers, never a
product over other rows); the structural filter and the one-thread BLAS limit cost
microseconds and give what they gave."""

from __future__ import annotations

import threading

import numpy as np
from threadpoolctl import ThreadpoolController

from vicar.memory import blas
from vicar.memory.blas import single_threaded_blas
from vicar.memory.chunk import MemoryChunk
from vicar.memory.index import MemoryIndex, VectorColumn
from vicar.memory.store import RecordStore

RECENT_SQL = (
    "SELECT id, outcome, human_response FROM chunks WHERE state = ? AND task_type = ?"
    " AND answered_by = 'human' AND kind = ? ORDER BY created_n DESC LIMIT ?"
)


def _chunk(i: int, task_type: str, by: str = "human") -> MemoryChunk:
    return MemoryChunk(
        id=f"c-{i:05d}",
        principal="pat",
        state="PLAN_ASSERT",
        task_type=task_type,
        outcome=["approve", "correct", "reject"][i % 3],
        answered_by=by,
        human_response=f"answer {i}",
        created_n=i,
    )


def test_the_newest_human_answers_are_an_index_walk(tmp_path):
    store = RecordStore(tmp_path / "memory.db")
    try:
        for i in range(1, 301):
            store.add_chunk(_chunk(i, "docs" if i % 2 else "db", "proxy" if i % 7 == 0 else "human"))
        plan = " ".join(r[3] for r in store._db.execute("EXPLAIN QUERY PLAN " + RECENT_SQL, ("a", "b", "gate", 5)))
        assert "chunks_context_recent" in plan and "TEMP B-TREE" not in plan, plan
        replies = store.recent_human_replies("gate", "PLAN_ASSERT", "docs", 20)
        # Newest first, the proxy's answers left out.
        expected = sorted((i for i in range(1, 301) if i % 2 and i % 7), key=lambda i: -i)[:20]
        assert [r.id for r in replies] == [f"c-{i:05d}" for i in expected]
        assert [(r.outcome, r.human_response) for r in replies] == [
            (["approve", "correct", "reject"][i % 3], f"answer {i}") for i in expected
        ]
        # The chunks themselves, the same answers in the same order.
        assert [c.id for c in store.recent_human_answers("gate", "PLAN_ASSERT", "docs", 20)] == [r.id for r in replies]
    finally:
        store.close()


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_column_product_is_reused_only_while_the_column_is_unchanged():
    rng = np.random.default_rng(0)
    col = VectorColumn(384)
    for i, v in enumerate(_unit(rng, 401)):
        col.set(i, v)
    q = _unit(rng, 1)[0]
    everything = np.arange(401)
    with single_threaded_blas():
        first = col.cosine(everything, q)
        fresh = col.rows.view @ q
        assert np.array_equal(first, fresh)  # bit for bit: the product over the whole column
        assert col.column_product(q) is col.column_product(q.copy())  # same bytes: kept
        col.set(401, _unit(rng, 1)[0])  # a new row: a new product, with the new row in it
        grown = col.cosine(np.arange(402), q)
        assert np.array_equal(grown, col.rows.view @ q)
        col.set(3, -col.rows.view[3])  # a row changed in place
        assert col.cosine(everything, q)[3] == -first[3]
        other = _unit(rng, 1)[0]
        assert np.array_equal(col.cosine(everything, other), (col.rows.view @ other)[:401])


def test_a_list_filter_matches_what_isin_matched():
    index = MemoryIndex(384)
    kinds = ["gate", "preference", "procedure", "censor", "question"]
    for i in range(200):
        fields = dict(
            kind=kinds[i % 5], state="S", task_type="t", outcome="approve", answered_by="human", status="active"
        )
        index.add_chunk(f"c{i}", fields, [i])
    got = index.candidates({"kind": ["gate", "procedure", "missing"], "state": "S"})
    assert np.array_equal(got, np.array([i for i in range(200) if i % 5 in (0, 2)]))
    assert len(index.candidates({"kind": ["missing", "absent"]})) == 0


def _blas_threads() -> list[int]:
    return [lib.get_num_threads() for lib in ThreadpoolController().select(user_api="blas").lib_controllers]


def test_one_blas_thread_inside_and_the_count_restored_after():
    before = _blas_threads()
    with single_threaded_blas():
        with single_threaded_blas():
            assert _blas_threads() == [1] * len(before)
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


class _Lib:
    """A BLAS library's controller that records what it is told."""

    def __init__(self) -> None:
        self.threads = 4
        self.calls: list[int] = []

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, n: int) -> None:
        self.calls.append(n)
        self.threads = n


def test_the_blas_limit_is_counted_across_threads(monkeypatch):
    lib = _Lib()
    monkeypatch.setattr(blas, "_libs", [lib])
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def hold() -> None:
        with single_threaded_blas():
            first_in.set()
            second_in.wait(10)
            release.wait(10)
            seen.append(lib.threads)

    t = threading.Thread(target=hold)
    t.start()
    first_in.wait(10)
    with single_threaded_blas():
        second_in.set()
        with single_threaded_blas():  # nested
            seen.append(lib.threads)
    seen.append(lib.threads)  # the other thread still inside: not restored yet
    release.set()
    t.join(10)
    assert seen == [1, 1, 1]
    assert lib.calls == [1, 4] and lib.threads == 4  # set once by the first in, restored once by the last out
