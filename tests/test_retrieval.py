"""Retrieval variants on a real memory (real embedder, real Chroma)."""

from __future__ import annotations

import pytest

from vicar.memory.chunk import ChunkKind, MemoryChunk
from vicar.memory.principal import PrincipalMemory
from vicar.memory.retrieval import EmbeddingMode, Query, RetrievalMode
from vicar.settings import MemoryParams


def chunk(i: int, **kw) -> MemoryChunk:
    base = dict(
        id=f"c{i:03d}",
        principal="alice",
        state="PLAN_ASSERT",
        task_type="db-migration",
        outcome="approve",
        answered_by="human",
        question="Approve the migration plan?",
        created_n=i,
        traces=[i],
    )
    base.update(kw)
    return MemoryChunk(**base)


@pytest.fixture
def memory(settings, embedder):
    def make(**params):
        return PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams(**params))

    return make


def ids(hits):
    return [h.chunk_id for h, _ in hits]


def test_structural_filters_kinds_and_any(memory):
    mem = memory()
    mem.record(chunk(1, kind=ChunkKind.preference, human_response="Always wants a rollback plan."))
    mem.record(chunk(2, kind=ChunkKind.censor, outcome="reject", human_response="Never drop tables."))
    mem.record(chunk(3, task_type="docs", human_response="Fine."))
    mem.record(chunk(4, answered_by="proxy", human_response="Approved."))
    q = dict(now=5, texts={"situation": "migration plan"})
    assert set(ids(mem.retrieve(Query(**q)))) == {"c001", "c002", "c003", "c004"}
    assert ids(mem.retrieve(Query(**q, filters={"kind": "censor"}))) == ["c002"]
    assert set(
        ids(mem.retrieve(Query(**q, filters={"kind": "any", "task_type": "db-migration", "answered_by": "human"})))
    ) == {"c001", "c002"}
    assert ids(mem.retrieve(Query(**q, filters={"outcome": "correct"}))) == []
    with pytest.raises(ValueError, match="cannot filter on"):
        mem.retrieve(Query(**q, filters={"colour": "red"}))


def test_activation_threshold_forgets(memory):
    mem = memory(threshold=-0.5)
    mem.record(chunk(1, human_response="old"))
    q = Query(now=3, texts={"situation": "x"})
    assert ids(mem.retrieve(q)) == ["c001"]  # age 2: B = -0.35 > -0.5
    assert ids(mem.retrieve(Query(now=4, texts={"situation": "x"}))) == []  # age 3: B = -0.55


def test_ranking_modes(memory):
    mem = memory()
    mem.record(chunk(1, artifact_excerpt="Add a rollback step that drops the new index.", traces=[1, 2, 3, 4]))
    mem.record(chunk(2, artifact_excerpt="Bump the numpy version in requirements.", traces=[5]))
    mem.record(chunk(9, artifact_excerpt="Update the README typo.", traces=[9]))
    texts = {
        "situation": "PLAN_ASSERT db-migration: Approve the migration plan?",
        "artifact": "Rollback: drop the index if the migration fails.",
    }
    # Reinforced four times, c001 is the most active; c009 the most recent.
    assert ids(mem.retrieve(Query(now=10, texts=texts, mode=RetrievalMode.activation)))[0] == "c001"
    assert ids(mem.retrieve(Query(now=10, texts=texts, mode=RetrievalMode.recency))) == ["c009", "c002", "c001"]
    sim = mem.retrieve(Query(now=10, texts=texts, mode=RetrievalMode.similarity))
    assert ids(sim)[0] == "c001"
    assert sim[0][0].score == pytest.approx(sim[0][0].similarity)
    blended = mem.retrieve(Query(now=10, texts=texts, embedding=EmbeddingMode.blended, mode=RetrievalMode.similarity))
    assert ids(blended)[0] == "c001"
    assert blended[0][0].similarity != pytest.approx(sim[0][0].similarity)  # a different embedding
    top1 = mem.retrieve(Query(now=10, texts=texts, top_k=1))
    assert len(top1) == 1


def test_lexical_fusion_finds_an_exact_term(memory):
    mem = memory()
    mem.record(chunk(1, artifact_excerpt="Migrate orders table; add column.", human_response="ok"))
    mem.record(
        chunk(
            2,
            artifact_excerpt="Rotate the XK-4471 credentials before the cutover.",
            human_response="Check XK-4471 first.",
        )
    )
    for i in range(3, 12):
        mem.record(chunk(i, artifact_excerpt=f"Migrate table t{i}; add column c{i}.", human_response="ok"))
    texts = {"artifact": "credentials XK-4471"}
    dense = ids(mem.retrieve(Query(now=13, texts=texts, top_k=3, mode=RetrievalMode.activation)))
    fused = ids(mem.retrieve(Query(now=13, texts=texts, top_k=3, mode=RetrievalMode.activation, lexical=True)))
    # By activation alone the old c002 ranks low; only it contains the term, so BM25
    # ranks it first and reciprocal rank fusion puts it on top.
    assert dense[0] != "c002"
    assert fused[0] == "c002"
    # A new chunk makes the lexical index stale; the next lexical query sees it.
    mem.record(chunk(12, artifact_excerpt="ZQ-9 token rotation", human_response="ok"))
    assert ids(mem.retrieve(Query(now=13, texts={"artifact": "ZQ-9"}, top_k=1, lexical=True))) == ["c012"]


def test_seeded_noise_is_reproducible(memory):
    mem = memory(noise_s=0.5)
    for i in range(1, 30):
        mem.record(chunk(i, human_response=f"answer {i}"))
    q = dict(now=31, texts={"situation": "migration"}, mode=RetrievalMode.activation, top_k=10)
    a = ids(mem.retrieve(Query(**q, noise_seed=7)))
    assert a == ids(mem.retrieve(Query(**q, noise_seed=7)))  # a retried retrieval
    assert a != ids(mem.retrieve(Query(**q, noise_seed=8)))  # another seed, another draw
    assert ids(mem.retrieve(Query(**q))) == [f"c{i:03d}" for i in range(29, 19, -1)]  # no seed, no noise


def test_spreading_activation_from_co_retrieval(memory):
    mem = memory()
    for i in range(1, 6):
        mem.record(chunk(i, human_response=f"r{i}", traces=[i]))
    mem.record(chunk(6, human_response="seed", traces=[6, 7, 8]))
    for n in (9, 10, 11):  # c001 was used together with c006, the most active chunk
        mem.reinforce(["c006", "c001"], n)
    mem.close()
    query = Query(now=12, texts={"situation": "migration plan"}, mode=RetrievalMode.activation)
    activation = {}
    for spreading in (False, True):
        mem = memory(spreading=spreading, spreading_seeds=1)  # reopened from disk
        activation[spreading] = {h.chunk_id: h.activation for h, _ in mem.retrieve(query)}
        mem.close()
    assert activation[True]["c001"] > activation[False]["c001"]  # boosted by its co-access
    assert activation[True]["c002"] == pytest.approx(activation[False]["c002"])  # never used with it


def test_reinforcement_is_per_chunk_and_n(memory):
    mem = memory()
    mem.record(chunk(1))
    mem.record(chunk(2))
    assert mem.reinforce(["c001", "c001", "c002"], 5) == ["c001", "c002"]
    assert mem.reinforce(["c001"], 5) == []
    assert mem.store.coaccess() and {(a, b) for a, b, _ in mem.store.coaccess()} == {("c001", "c002"), ("c002", "c001")}
    assert mem.store.get_chunk("c001").traces == [1, 5]


def test_salience_index_is_queried_by_artifact(memory):
    mem = memory()
    mem.record(
        chunk(
            1,
            surprise_description="The plan dropped a table without a backup.",
            salient_percepts=["drop table", "no backup"],
        )
    )
    mem.record(chunk(2, surprise_description="Docs link to a missing page.", salient_percepts=["broken link"]))
    mem.record(chunk(3))  # no surprise: not in the salience index
    hits = mem.salient("Step 3: DROP TABLE sessions; we skip the backup to save time.", now=4)
    assert ids(hits)[0] == "c001"
    assert "c003" not in ids(hits)


def test_lexical_tokens_match_bm25s():
    import bm25s

    from vicar.memory.lexical import tokenize

    texts = [
        "PLAN_ASSERT db-migration: Approve or revise the proposed plan.",
        "It's the ÜBER-fast i2c_smbus path!",
        "a an the of x y zz 42 3.14 foo_bar naïve café",
        "",
        "   ",
        "hwmon: (pmbus/ltc2978) Add support",
    ]
    assert tokenize(texts) == bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
