"""Memory: activation, idempotent writes, isolation between principals (real Chroma, real embedder)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vicar.memory.activation import base_level, base_levels
from vicar.memory.principal import PrincipalMemory
from vicar.memory.registry import MemoryRegistry
from vicar.memory.retrieval import Query
from vicar.memory.store import StoreError
from vicar.models import GateRequest, OutcomeRecord
from vicar.proxy.outcomes import outcome_chunk


def reference_b(traces, now, d=0.5):
    return math.log(sum((now - t) ** -d for t in traces))


def test_base_level_matches_the_formula():
    assert base_level([1, 5, 9], 12) == pytest.approx(reference_b([1, 5, 9], 12))
    # A single trace with d = 0.5 drops below tau = -0.5 after 3 interactions (docs/design/NOTES.md).
    assert base_level([0], 2) > -0.5 > base_level([0], 3)
    assert base_level([], 10) == -math.inf


def test_vectorized_base_levels_match_scalar():
    rng = np.random.default_rng(7)
    owner = rng.integers(0, 50, 400)
    traces = rng.integers(0, 900, 400)
    got = base_levels(owner, traces, 52, now=1000)
    for j in range(50):
        ts = traces[owner == j]
        want = reference_b(ts, 1000) if len(ts) else -math.inf
        assert got[j] == pytest.approx(want)
    assert got[50] == -math.inf and got[51] == -math.inf  # chunks without traces


def gate_record(principal: str, i: int, action: str = "approve", answered_by: str = "human") -> OutcomeRecord:
    req = GateRequest(
        principal=principal,
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type="docs",
        question="Approve the plan?",
        artifact_text=f"Fix typo {i} in the guide.",
    )
    return OutcomeRecord(
        request=req, n=i, workflow_id=f"vicar-gate/g{i}", action=action, response_text="Fine.", answered_by=answered_by
    )


def test_record_and_reinforce_are_idempotent(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory)
    chunk = outcome_chunk(gate_record("alice", 1))
    assert mem.record(chunk) is True
    assert mem.record(chunk) is False  # a retried store activity
    assert mem.store.count() == 1 and mem.store.trace_count() == 1
    assert mem.vectors.count() == len(chunk.vector_texts(mem.params.blended_vectors))
    assert mem.reinforce([chunk.id], 4) == [chunk.id]
    assert mem.reinforce([chunk.id], 4) == []  # retried reinforcement: no second trace at N=4
    assert mem.store.get_chunk(chunk.id).traces == [1, 4]
    mem.close()
    # Reopened from disk, the index holds the same chunk, traces and vectors.
    again = PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory)
    hits = again.retrieve(Query(now=5, texts={"situation": "PLAN_ASSERT docs: Approve the plan?"}))
    assert [h.chunk_id for h, _ in hits] == [chunk.id]
    assert hits[0][0].activation == pytest.approx(reference_b([1, 4], 5))
    again.close()


def test_record_completes_after_a_crash_between_vectors_and_record(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory)
    chunk = outcome_chunk(gate_record("alice", 1))
    texts = chunk.dimension_texts()
    # The first attempt died after writing vectors, before the SQLite record.
    mem.vectors.upsert(chunk.id, dict(zip(texts, embedder.embed(list(texts.values())))))
    assert mem.store.count() == 0
    assert mem.record(chunk) is True
    assert mem.store.count() == 1 and mem.vectors.count() == len(chunk.vector_texts(mem.params.blended_vectors))
    mem.close()


def test_missing_dimension_is_not_zero_similarity(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory)
    chunk = outcome_chunk(gate_record("alice", 1))
    mem.record(chunk)
    situation = "PLAN_ASSERT docs: Approve the plan?"
    only = mem.retrieve(Query(now=2, texts={"situation": situation}))[0][0].similarity
    # The chunk has no salience vector: a salience query text must not drag the mean down.
    both = mem.retrieve(Query(now=2, texts={"situation": situation, "salience": "rollback"}))[0][0].similarity
    assert only == pytest.approx(both)
    mem.close()


def test_principals_are_isolated(settings, embedder):
    reg = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    a, b = reg.get("alice"), reg.get("bob")
    chunk = outcome_chunk(gate_record("alice", 1))
    a.record(chunk)
    query = Query(now=2, texts={"situation": "PLAN_ASSERT docs: Approve the plan?"})
    assert len(a.retrieve(query)) == 1
    # Not by query, filter, lexical search, salience or id does bob's memory hold it.
    for filters in ({}, {"kind": "any", "state": "any", "task_type": "any"}, {"answered_by": "human"}):
        assert b.retrieve(Query(now=2, texts=query.texts, filters=filters, lexical=True)) == []
    assert b.salient("Fix typo 1 in the guide.", now=2) == []
    assert b.store.get_chunk(chunk.id) is None and b.reinforce([], 2) == []
    with pytest.raises(StoreError, match="unknown chunk"):
        b.reinforce([chunk.id], 2)
    assert b.vectors.count() == 0 and b.dir != a.dir
    with pytest.raises(StoreError):
        b.record(outcome_chunk(gate_record("alice", 2)))  # alice's chunk offered to bob's memory
    assert b.store.count() == 0
    reg.close()
    # A directory claimed by one principal refuses to open as another.
    (settings.principals_dir / "mallory").symlink_to(settings.principals_dir / "alice")
    with pytest.raises(StoreError, match="belongs to principal 'alice'"):
        PrincipalMemory("mallory", settings.principals_dir, embedder, settings.memory)


def test_store_refuses_another_embedding_model(settings, embedder):
    PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory).close()

    class Other:
        model_name, dim = "text-embedding-3-small", 1536

    with pytest.raises(StoreError, match="reembed"):
        PrincipalMemory("alice", settings.principals_dir, Other(), settings.memory)


def test_invalid_principal_names_never_become_paths(settings, embedder):
    for bad in ("../etc", "a/b", "", ".hidden", "x" * 65):
        with pytest.raises(ValueError):
            PrincipalMemory(bad, settings.principals_dir, embedder, settings.memory)


def test_retried_store_activity_writes_one_chunk(settings, embedder):
    """The real activity, run twice with the same input as Temporal's retry would."""
    from temporalio.testing import ActivityEnvironment

    from vicar.activities.proxy import ProxyActivities
    from vicar.proxy.offline import OfflinePredictor

    reg = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    acts = ProxyActivities(None, reg, OfflinePredictor(), settings)
    env = ActivityEnvironment()
    record = gate_record("alice", 3)
    first = env.run(acts.record_outcome, record)
    second = env.run(acts.record_outcome, record)
    assert first == second
    mem = reg.get("alice")
    assert mem.store.count() == 1 and mem.store.trace_count() == 1
    assert mem.vectors.count() == len(mem.store.get_chunk(first).vector_texts(mem.params.blended_vectors))
    reg.close()


def test_memory_depth_is_kept_as_chunks_come_and_rebuilt_on_open(settings, embedder):
    mem = PrincipalMemory("dora", settings.principals_dir, embedder, settings.memory)
    assert mem.memory_depth() == 0
    mem.record(outcome_chunk(gate_record("dora", 1, answered_by="proxy")))  # the proxy's answers do not count
    assert mem.memory_depth() == 0
    for i, task in enumerate(["docs", "docs", "db-migration"], start=2):
        rec = gate_record("dora", i)
        rec = rec.model_copy(update={"request": rec.request.model_copy(update={"task_type": task})})
        mem.record(outcome_chunk(rec))
    assert mem.memory_depth() == mem.store.memory_depth() == 2
    mem.close()
    again = PrincipalMemory("dora", settings.principals_dir, embedder, settings.memory)
    assert again.memory_depth() == again.store.memory_depth() == 2
    again.close()


def test_blended_vectors_only_when_blended_retrieval_reads_them(settings, embedder):
    """The shipped retrieval (multi) never reads a chunk's blended vector: the worker's
    memories skip embedding it (the gate's largest single CPU cost). Switching to blended
    retrieval embeds the missing ones when the memory is next opened."""
    from vicar.memory.check import check
    from vicar.memory.chunk import BLENDED
    from vicar.memory.retrieval import EmbeddingMode
    from vicar.settings import RetrievalOptions, Settings

    assert settings.memory.blended_vectors is False  # Settings follows retrieval.embedding = multi
    blended_settings = Settings(data_dir=settings.data_dir, retrieval=RetrievalOptions(embedding="blended"))
    assert blended_settings.memory.blended_vectors is True
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, settings.memory)
    chunks = [outcome_chunk(gate_record("alice", i)) for i in (1, 2)]
    for ch in chunks:
        mem.record(ch)
    assert mem.vectors.count() == sum(len(ch.dimension_texts()) for ch in chunks)
    assert not any(mem.index.has_vector(ch.id, BLENDED) for ch in chunks)
    mem.close()
    assert check(settings.principals_dir, "alice", blended=False).healthy
    assert check(settings.principals_dir, "alice", blended=True).chunks_missing_vectors == 2

    mem = PrincipalMemory("alice", settings.principals_dir, embedder, blended_settings.memory)
    try:
        assert mem.rebuilt_on_open is not None and mem.rebuilt_on_open.missing_vectors == 2
        assert all(mem.index.has_vector(ch.id, BLENDED) for ch in chunks)
        hits = mem.retrieve(Query(now=3, texts=chunks[1].dimension_texts(), embedding=EmbeddingMode.blended))
        assert hits and hits[0][0].chunk_id == chunks[1].id
    finally:
        mem.close()
    assert check(settings.principals_dir, "alice", blended=True).healthy
