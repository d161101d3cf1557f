"""The record store: migrations, crash consistency, reconcile."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from vicar.memory.principal import PrincipalMemory
from vicar.memory.retrieval import Query
from vicar.memory.store import MIGRATIONS, RecordStore, StoreError
from vicar.settings import MemoryParams

from .conftest import docs_chunk

ROOT = Path(__file__).resolve().parents[1]


def test_migrates_a_version_1_store(tmp_path):
    path = tmp_path / "memory.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO chunks VALUES ('c1','gate','PLAN_ASSERT','docs','approve','human',NULL,'g1','q','a','',NULL,"
        "NULL,'',NULL,'','','[]','ok',1)"
    )
    db.execute("INSERT INTO traces VALUES ('c1', 1)")
    db.commit()
    db.close()
    store = RecordStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert store.get_chunk("c1").traces == [1]
    assert store.coaccess() == []  # the v2 table exists
    store.close()


def test_refuses_a_store_from_the_future(tmp_path):
    path = tmp_path / "memory.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="schema version"):
        RecordStore(path)


def test_a_killed_writer_leaves_a_consistent_store(tmp_path, embedder):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "crash_writer.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    written = 0
    deadline = time.monotonic() + 120
    while written < 40 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        written = int(line)
    time.sleep(0.013)  # land somewhere inside the next write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert written >= 40, "the writer did not get going"

    store = RecordStore(tmp_path / "crash" / "memory.db")
    assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    chunks = store.chunks()
    assert len(chunks) >= written
    for ch in chunks:
        assert ch.created_n in ch.traces  # never a record without its creation trace
    # Traces and co-access were written in one transaction: they always agree.
    reinforced = Counter(n for ch in chunks for n in ch.traces if n % 2 == 1)
    pairs = Counter()
    for a, b, n in store.coaccess():
        pairs[(a, b)] = n
    for a, b in list(pairs):
        assert pairs[(b, a)] == pairs[(a, b)]
    assert sum(pairs.values()) == 2 * sum(1 for c in reinforced.values() if c == 2)
    assert store.counter() >= 2 * written + 1
    store.close()

    mem = PrincipalMemory("crash", tmp_path, embedder, MemoryParams())
    report = mem.reconcile()
    assert report.missing_vectors <= 1 and report.orphan_vectors <= 4  # at most the one write in flight
    assert len(report.lost_records) <= 1
    again = mem.reconcile()
    # Vectors without a record are kept (the trace of a lost answer), not deleted.
    assert again.missing_vectors == 0 and again.lost_records == report.lost_records
    n_vectors = sum(len(ch.vector_texts()) for ch in mem.store.chunks())
    assert mem.vectors.count() == n_vectors + report.orphan_vectors
    mem.close()


def test_reconcile_repairs_both_directions(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    ch = docs_chunk(1)
    mem.record(ch)
    mem.vectors.delete(["c1:response"])  # a record missing a vector ...
    mem.vectors.upsert("ghost", {"situation": embedder.embed(["boo"])[0]})  # ... and a vector without a record
    mem.close()
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    assert not mem.index.has_vector("c1", "response")
    report = mem.reconcile()
    assert report.missing_vectors == 1 and report.orphan_vectors == 1 and report.lost_records == ["ghost"]
    assert mem.index.has_vector("c1", "response")
    # The ghost's vector stays (a lost record's last trace) and never reaches retrieval.
    assert sorted(vid for vid, _ in mem.vectors.ids()) == sorted(
        [*(f"c1:{d}" for d in ch.vector_texts()), "ghost:situation"]
    )
    assert "ghost" not in mem.index.pos
    assert [c.id for _, c in mem.retrieve(Query(now=2, texts={"situation": "boo"}))] == ["c1"]
    mem.close()


def test_read_only_vector_ids_agree_with_chroma(settings, embedder):
    """`vicar memory check` reads the vector ids from Chroma's SQLite file without a Chroma
    client (which writes): the two must agree on the installed Chroma, deletions included."""
    from vicar.memory import readonly
    from vicar.memory.vectors import collection_name

    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    for i in range(1, 4):
        mem.record(docs_chunk(i))
    mem.vectors.delete(["c2:response"])
    expected = sorted(mem.vectors.ids())
    db = settings.principals_dir / "alice" / "chroma" / "chroma.sqlite3"
    assert sorted(readonly.vector_ids(db, collection_name(embedder.model_name))) == expected  # open
    mem.close()
    assert sorted(readonly.vector_ids(db, collection_name(embedder.model_name))) == expected  # closed
    assert readonly.vector_ids(db, collection_name("another-model")) == []


def test_cached_chunks_follow_the_store(tmp_path):
    """Retrieval reads chunks through the store's cache: a copy per caller, and a
    transaction that changes a row (consolidation's) is seen by the next read."""
    from vicar.memory.chunk import MemoryChunk

    store = RecordStore(tmp_path / "memory.db")
    store.set_meta("principal", "alice")
    store.add_chunk(
        MemoryChunk(
            id="c1",
            principal="alice",
            state="s",
            task_type="t",
            outcome="approve",
            answered_by="human",
            human_response="ok",
            salient_percepts=["x"],
            created_n=1,
        )
    )
    first = store.get_chunks(["c1"], with_traces=False)[0]
    first.salient_percepts.append("changed by a caller")
    assert store.get_chunks(["c1"], with_traces=False)[0].salient_percepts == ["x"]
    with store.transaction() as db:
        db.execute("UPDATE chunks SET human_response = 'no', status = 'superseded' WHERE id = 'c1'")
    again = store.get_chunks(["c1"], with_traces=False)[0]
    assert (again.human_response, again.status) == ("no", "superseded")
    store.close()


def test_a_transaction_left_open_by_an_interrupted_caller_is_undone(tmp_path):
    """A sync activity cancelled between BEGIN and COMMIT (the SDK raises the cancel in its
    thread, anywhere) left the connection in a transaction; every later one failed with
    "cannot start a transaction within a transaction" (seen in the soak: a principal's
    turns refused for ever). The next transaction rolls the stale one back."""
    store = RecordStore(tmp_path / "memory.db")
    assert store.advance_counter(1, None) == (True, 1)
    store._db.execute("BEGIN IMMEDIATE")  # what an interrupted caller leaves behind
    store._db.execute(
        "INSERT INTO meta (key, value) VALUES ('counter', '99') ON CONFLICT(key) DO UPDATE SET value = excluded.value"
    )
    assert store.advance_counter(2, None) == (True, 2)  # the stale write is undone, not kept
    assert store.counter() == 2
    store.close()


def test_human_answers_from_an_agent_are_counted_by_the_index_up_to_the_bound(tmp_path):
    from vicar.memory.chunk import MemoryChunk

    store = RecordStore(tmp_path / "memory.db")
    store.set_meta("principal", "alice")
    for i, (agent, by) in enumerate([("bot", "human")] * 5 + [("bot", "proxy"), ("other", "human"), (None, "human")]):
        store.add_chunk(
            MemoryChunk(
                id=f"c{i}",
                principal="alice",
                state="s",
                task_type="t",
                outcome="approve",
                answered_by=by,
                human_response="ok",
                upstream_agent=agent,
                created_n=i + 1,
            )
        )
    # The proxy's own answers are no human answers; the count stops at the bound.
    assert [store.human_answers_from("bot", most) for most in (0, 3, 5, 10)] == [0, 3, 5, 5]
    assert store.human_answers_from("other", 10) == 1 and store.human_answers_from("new", 10) == 0
    plan = " ".join(
        r[-1]
        for r in store._db.execute(
            "EXPLAIN QUERY PLAN SELECT 1 FROM chunks INDEXED BY chunks_agent WHERE upstream_agent = ? AND answered_by"
            " = 'human' LIMIT 3",
            ("bot",),
        )
    )
    assert "USING COVERING INDEX chunks_agent" in plan
    store.close()
