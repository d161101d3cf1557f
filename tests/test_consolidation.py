"""Consolidation's ADD / UPDATE / DELETE / SKIP on a real memory (SQLite, Chroma, MiniLM)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from vicar.memory.consolidation import apply_consolidation, memory_fingerprint, plan_consolidation
from vicar.memory.principal import PrincipalMemory
from vicar.memory.retrieval import Query
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord
from vicar.proxy.outcomes import outcome_chunk
from vicar.settings import MemoryParams

PLAN = "Add a unique index on users.email; rollback drops the index."


@pytest.fixture
def memory(tmp_path, embedder):
    m = PrincipalMemory("alice", tmp_path, embedder, MemoryParams(noise_s=0.0))
    yield m
    m.close()


def add(memory, n, action="approve", text="Fine.", artifact=PLAN, agent=None, task_type="db-migration") -> str:
    req = GateRequest(
        principal="alice",
        gate_id=f"g{n}",
        state="PLAN_ASSERT",
        task_type=task_type,
        question="Approve or revise the proposed plan.",
        artifact_text=artifact,
        actor_message="Plan for the users table.",
        upstream_agent=agent,
    )
    chunk = outcome_chunk(
        OutcomeRecord(
            request=req,
            n=n,
            workflow_id=f"w{n}",
            action=Action(action),
            response_text=text,
            answered_by=AnsweredBy.human,
        )
    )
    memory.record(chunk)
    return chunk.id


def consolidate(memory, session, new):
    plan = plan_consolidation(memory, session, new)
    return plan, apply_consolidation(memory, plan)


def retrievable(memory, n=500) -> set[str]:
    return {c.id for _, c in memory.retrieve(Query(now=n, filters={"kind": "gate"}, texts={"artifact": PLAN}))}


def test_add_for_a_new_case_and_skip_for_the_same_answer(memory):
    a = add(memory, 1)
    b = add(memory, 2, artifact="Rewrite the README's installation section for Windows users.", task_type="docs")
    c = add(memory, 3)  # the same case, the same answer
    plan, report = consolidate(memory, "s1", [b, c])
    ops = {d.chunk_id: d.op for d in plan.decisions}
    assert ops == {b: "ADD", c: "SKIP"}
    assert report.applied == 2 and report.superseded == []
    assert {a, b, c} <= {ch.id for ch in memory.store.chunks()}


def test_update_really_updates_the_existing_chunk(memory):
    a = add(memory, 1, "correct", "Add a rollback step.")
    before = memory.index.vectors_of(a, ("response",))["response"]
    b = add(memory, 2, "correct", "Where is the rollback? Please add a down migration.")
    plan, report = consolidate(memory, "s1", [b])
    [d] = plan.decisions
    assert (d.op, d.target_id, d.superseded) == ("UPDATE", a, b)
    updated = memory.store.get_chunk(a)
    assert updated.human_response == "Where is the rollback? Please add a down migration."
    assert updated.traces == [1, 2]  # it carries the folded chunk's history
    after = memory.index.vectors_of(a, ("response",))["response"]
    assert not np.allclose(before, after)  # re-embedded, in the index and in Chroma
    stored = {dim: vec for cid, dim, vec in memory.vectors.load_all() if cid == a}
    assert np.allclose(stored["response"], after, atol=1e-6)  # Chroma has the new vector too
    folded = memory.store.get_chunk(b)
    assert (folded.status, folded.superseded_by) == ("superseded", a)  # kept, marked
    assert b not in retrievable(memory) and a in retrievable(memory)


def test_preference_drift_deletes_the_older_answer_with_a_tombstone(memory):
    old = add(memory, 1, "approve", "Fine.")
    new = add(memory, 80, "correct", "We now require a down migration for every schema change.")
    plan, report = consolidate(memory, "s2", [new])
    [d] = plan.decisions
    assert (d.op, d.conflict, d.superseded) == ("DELETE", "preference_drift", old)
    assert memory.store.get_chunk(old).status == "superseded"  # never lost
    assert old not in retrievable(memory) and new in retrievable(memory)
    [entry] = memory.store.audit_log()
    assert entry["op"] == "DELETE" and entry["chunk_id"] == new and '"outcome":"approve"' in entry["tombstone"]
    assert "preference drift" in entry["reason"]


def test_genuine_tension_keeps_both_and_is_recorded(memory):
    a = add(memory, 1, "approve", "Fine.")
    b = add(memory, 5, "reject", "No: not on a Friday.")
    plan, report = consolidate(memory, "s3", [b])
    [d] = plan.decisions
    assert (d.op, d.conflict) == ("ADD", "genuine_tension") and report.tensions == 1
    assert memory.store.tensions() == {tuple(sorted((a, b)))}
    assert {a, b} <= retrievable(memory)
    # Another upstream agent: context sensitivity, no tension.
    c = add(memory, 7, "reject", "No.", agent="bot-2")
    plan, _ = consolidate(memory, "s4", [c])
    assert [x.conflict for x in plan.decisions] == ["context_sensitivity"]


def test_apply_is_idempotent(memory):
    add(memory, 1, "correct", "Add a rollback step.")
    b = add(memory, 2, "correct", "Add a down migration.")
    plan = plan_consolidation(memory, "s5", [b])
    apply_consolidation(memory, plan)
    once = memory_fingerprint(memory)
    again = apply_consolidation(memory, plan)
    assert again.applied == 0 and memory_fingerprint(memory) == once


def test_no_cluster_ever_vanishes(tmp_path, embedder):
    """Many near-identical cases with mixed answers and times: whatever the verdicts,
    every superseded chunk leads to an active one."""
    rng = random.Random(3)
    memory = PrincipalMemory("alice", tmp_path, embedder, MemoryParams(noise_s=0.0))
    try:
        ids, n = [], 0
        for session in range(4):
            new = []
            for _ in range(6):
                n += rng.choice([1, 2, 60])
                new.append(
                    add(
                        memory,
                        n,
                        rng.choice(["approve", "correct"]),
                        rng.choice(["Fine.", "Add a rollback.", "Add a down migration.", ""]),
                    )
                )
            consolidate(memory, f"s{session}", new)
            ids += new
        chunks = {c.id: c for c in memory.store.chunks()}
        assert len(chunks) == len(ids)  # nothing removed
        for c in chunks.values():
            seen = set()
            while c.status == "superseded":
                assert c.id not in seen and c.superseded_by in chunks
                seen.add(c.id)
                c = chunks[c.superseded_by]
        assert any(c.status == "active" for c in chunks.values())
    finally:
        memory.close()


def test_a_recorded_tension_feeds_the_calibration_guard(memory):
    from vicar.proxy.consult import consult
    from vicar.proxy.offline import OfflinePredictor
    from vicar.settings import Settings

    add(memory, 1, "approve", "Fine.")
    b = add(memory, 5, "reject", "No: not on a Friday.")
    consolidate(memory, "s1", [b])
    gate = GateRequest(
        principal="alice",
        gate_id="next",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve or revise the proposed plan.",
        artifact_text=PLAN,
    )
    settings = Settings(data_dir=memory.dir)
    settings.calibration.tension_similarity = 1.01  # the retrieval heuristic alone cannot fire
    c = consult(memory, OfflinePredictor(), gate, 6, settings, reinforce=False)
    assert c.calibration.guard == "tension" and "recorded by consolidation" in c.calibration.note


def test_ambiguous_disagreements_go_to_the_judge(memory, monkeypatch):
    from tests.llm_standins import AnthropicStandIn
    from vicar.proxy.llm_predictor import LLMPredictor

    old = add(memory, 1, "approve", "Fine.")
    new = add(memory, 5, "correct", "Add a down migration.")
    # same=1.01: every disagreement counts as ambiguous here.
    offline = plan_consolidation(memory, "s1", [new], same=1.01)
    assert [(d.op, d.conflict) for d in offline.decisions] == [("ADD", "context_sensitivity")]
    assert "no judge offline" in offline.decisions[0].reason
    standin = AnthropicStandIn(["preference_drift", "I am not sure."])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.root)
    try:
        judge = LLMPredictor.from_env("anthropic").judge_conflict
        judged = plan_consolidation(memory, "s1", [new], judge=judge, same=1.01)
        assert [(d.op, d.conflict, d.superseded) for d in judged.decisions] == [("DELETE", "preference_drift", old)]
        body = standin.bodies()[0]
        assert "EARLIER" in AnthropicStandIn.user_text(body) and "Fine." in AnthropicStandIn.user_text(body)
        unsure = plan_consolidation(memory, "s1", [new], judge=judge, same=1.01)  # an unusable verdict
        assert [(d.op, d.conflict) for d in unsure.decisions] == [("ADD", "context_sensitivity")]
    finally:
        standin.close()
