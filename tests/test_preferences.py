"""Preferences: learned from the concerns a human repeats when turning work back, moved
asymmetrically by later answers (Hindsight), superseded or deactivated but never lost."""

from __future__ import annotations

import pytest

from vicar.llm import prompts
from vicar.memory.chunk import FACT_KINDS
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.facts import after_hindsight, concern_words, extract, hindsight, sentence_with
from vicar.proxy.learned_history import memory_features
from vicar.proxy.retrieval import retrieve
from vicar.settings import FactParams

from .conftest import record_answer

P = FactParams(hindsight_factor=2.0)  # asymmetric, as Hindsight has it (the shipped 1 is symmetric)
PLAN = "Migration plan: add the column orders.note, backfill it, deploy."
WITH_ROLLBACK = PLAN + " Rollback: drop the column."


def gate(i: int, artifact: str = PLAN, task_type: str = "db-migration") -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type=task_type,
        question="Approve the migration plan?",
        artifact_text=artifact,
    )


def answer(mem: PrincipalMemory, i: int, action: str, text: str, artifact: str = PLAN) -> None:
    record_answer(mem, gate(i, artifact), i, action, text, facts=P)


def taught(mem: PrincipalMemory) -> None:
    answer(mem, 1, "approve", "Looks good, thanks.", WITH_ROLLBACK)
    answer(mem, 2, "correct", "Where is the rollback? Thanks.")
    answer(mem, 3, "approve", "Good, thanks.", WITH_ROLLBACK)
    answer(mem, 4, "reject", "No rollback step, no deploy.")
    answer(mem, 5, "correct", "Fine otherwise. Migrations need a rollback step.")


def live(mem: PrincipalMemory):
    return [f for f in mem.store.facts("preference") if f.live]


def test_a_repeated_concern_becomes_a_preference_retrieved_beside_the_episodes(memory):
    taught(memory)
    [fact] = extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P)
    assert (fact.subject, fact.text, fact.stage, fact.confidence) == (
        "rollback",
        "Migrations need a rollback step.",
        "learned",
        0.5,
    )
    assert len(fact.provenance) == 3
    # "thanks" is said as often when approving: the reviewer's manner, not a concern.
    assert "thanks" not in {f.subject for f in memory.store.facts("preference")}
    assert extract(memory, [("PLAN_ASSERT", "db-migration")], 7, P) == []  # known: nothing new
    ctx = retrieve(memory, gate(8), 8, "posterior", PLAN)
    facts = [c for c in ctx.chunks if c.kind in FACT_KINDS]
    assert [(c.chunk_id, c.kind, c.confidence) for c in facts] == [(fact.id, "preference", 0.5)]
    assert any(c.kind not in FACT_KINDS for c in ctx.chunks)  # one search, both kinds
    # The learned model sees it as a feature, the LLM in the prompt.
    vote = PassResult(prose="", confidence=0.0)
    assert memory_features(vote, ctx, PLAN)["pref_unmet"] == 0.5
    assert memory_features(vote, ctx, WITH_ROLLBACK)["pref_unmet"] == 0.0
    block = prompts.memories_block(ctx.chunks)
    assert "Preference of this reviewer at PLAN_ASSERT / db-migration (confidence 0.50)" in block
    assert "Migrations need a rollback step." in block


def test_hindsight_moves_confidence_more_on_disconfirmation(memory):
    taught(memory)
    [fact] = extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P)
    answer(memory, 7, "correct", "Again: the rollback is missing.")
    answer(memory, 7, "correct", "Again: the rollback is missing.")  # a retried activity moves it once
    [f] = live(memory)
    assert f.confidence == pytest.approx(0.5 + 0.1 * 0.5) and f.confirmations == 1
    assert 7 in memory.store.get_chunk(fact.id).traces  # met again: a new trace
    answer(memory, 8, "approve", "Fine.")  # approved without a rollback: it does not always hold
    [f] = live(memory)
    assert f.confidence == pytest.approx(0.55 - 2 * 0.1 * 0.55) and f.disconfirmations == 1
    assert 8 not in memory.store.get_chunk(fact.id).traces  # disconfirmed: not met again
    answer(memory, 9, "approve", "Fine.", WITH_ROLLBACK)  # says nothing against it
    assert live(memory)[0].disconfirmations == 1
    # A symmetric update (factor 1) would have moved it as much down as up.
    moved = hindsight(
        memory,
        OutcomeRecord(
            request=gate(10),
            n=10,
            workflow_id="x",
            action=Action.approve,
            response_text="",
            answered_by=AnsweredBy.human,
        ),
        P.model_copy(update={"hindsight_factor": 1.0}),
    )
    assert moved.changed[0].confidence == pytest.approx(0.44 - 0.1 * 0.44) and moved.met_again == []


def test_a_disconfirmed_preference_is_deactivated_and_kept_in_the_audit_log(memory):
    taught(memory)
    [fact] = extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P)
    for i in range(7, 12):
        answer(memory, i, "approve", "Fine.")
    assert live(memory) == []
    [f] = memory.store.facts("preference")
    assert f.stage == "deactivated" and f.confidence < P.deactivate_at
    assert not any(c.kind in FACT_KINDS for c in retrieve(memory, gate(12), 12, "posterior", PLAN).chunks)
    [entry] = [e for e in memory.store.audit_log() if e["chunk_id"] == fact.id]
    assert entry["op"] == "DEACTIVATE" and "Migrations need a rollback step." in entry["tombstone"]


def test_a_superseded_preference_is_not_retrieved_but_stays_in_the_audit_log(memory):
    taught(memory)
    [old] = extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P)
    answer(memory, 7, "approve", "Fine.")  # its confidence falls below the start ...
    answer(memory, 8, "reject", "The rollback must be tested on a copy first.")  # ... and new words come
    [new] = extract(memory, [("PLAN_ASSERT", "db-migration")], 9, P)
    assert new.text == "The rollback must be tested on a copy first." and new.id != old.id
    [was] = [f for f in memory.store.facts("preference") if f.id == old.id]
    assert (was.stage, was.successor) == ("superseded", new.id)
    assert new.confidence == pytest.approx(live(memory)[0].confidence)  # the line's confidence carries on
    chunk = memory.store.get_chunk(old.id)
    assert (chunk.status, chunk.superseded_by) == ("superseded", new.id)
    ids = [c.chunk_id for c in retrieve(memory, gate(10), 10, "posterior", PLAN).chunks]
    assert new.id in ids and old.id not in ids
    [entry] = [e for e in memory.store.audit_log() if e["chunk_id"] == old.id]
    assert entry["op"] == "SUPERSEDE" and entry["target_id"] == new.id
    assert "Migrations need a rollback step." in entry["tombstone"]


def test_switched_off_nothing_is_learned_or_moved(memory):
    taught(memory)
    off = P.model_copy(update={"preferences": False})
    assert extract(memory, [("PLAN_ASSERT", "db-migration")], 6, off) == []
    assert hindsight(
        memory,
        OutcomeRecord(
            request=gate(7), n=7, workflow_id="y", action=Action.approve, response_text="", answered_by=AnsweredBy.human
        ),
        off,
    ) == ([], [], [])
    after_hindsight(
        memory,
        hindsight(
            memory,
            OutcomeRecord(
                request=gate(7),
                n=7,
                workflow_id="y",
                action=Action.approve,
                response_text="",
                answered_by=AnsweredBy.human,
            ),
            off,
        ),
        7,
    )


def test_concern_words_and_sentences():
    assert concern_words("The ROLLBACK, ok v2 2024") == {"rollback"}
    assert (
        sentence_with("Fine otherwise. Migrations need a rollback step.", "rollback")
        == "Migrations need a rollback step."
    )


def test_a_question_the_human_keeps_asking_becomes_a_procedure_in_the_working_memory(memory):
    from vicar.memory.working import load_working_memory
    from vicar.proxy.facts import extract_procedures, learn

    answer(memory, 1, "approve", "Fine. Was the migration tested on a staging copy?")
    answer(memory, 2, "correct", "Add the index first. Did you run it on staging first?")
    answer(memory, 3, "approve", "Looks good.")
    assert extract_procedures(memory, [("PLAN_ASSERT", "db-migration")], 4, P) == []  # twice is not a routine
    answer(memory, 4, "approve", "OK. How long does it lock the table on staging?")
    [proc] = [f for f in learn(memory, [("PLAN_ASSERT", "db-migration")], 5, P) if f.kind == "procedure"]
    assert (proc.subject, proc.text, proc.activations) == ("staging", "How long does it lock the table on staging?", 3)
    answer(memory, 6, "approve", "Tested on staging?")  # asked again: an activation and a trace
    [proc] = memory.store.facts("procedure")
    assert proc.activations == 4 and 6 in memory.store.get_chunk(proc.id).traces
    assert proc.id in [c.chunk_id for c in retrieve(memory, gate(7), 7, "prior").chunks]
    wm = load_working_memory(memory, 7, 2000)
    assert proc.id in wm.chunk_ids and "the human always checks: How long does it lock the table" in wm.block


def test_an_llm_reads_the_preferences_when_one_is_configured(memory, monkeypatch):
    from tests.llm_standins import AnthropicStandIn
    from vicar.proxy.llm_predictor import LLMPredictor

    taught(memory)
    standin = AnthropicStandIn(
        [
            "SUBJECT: Rollback | Migrations need a rollback step.\n"
            "SUBJECT: backups | Take a backup before any destructive change.\n"
            "Also, they are nice.\nSUBJECT: | nothing"
        ]
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.root)
    try:
        llm = LLMPredictor.from_env("anthropic")
        found = extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P, extractor=llm.extract_preferences)
        assert [(f.subject, f.text) for f in found] == [
            ("rollback", "Migrations need a rollback step."),
            ("backups", "Take a backup before any destructive change."),
        ]
        rollback = found[0]
        assert len(rollback.provenance) == 3  # the answers that say it
        user = AnthropicStandIn.user_text(standin.bodies()[0])
        assert "ANSWERS" in user and "[reject] No rollback step, no deploy." in user
        # A retry at the same N asks nothing and adds nothing.
        assert extract(memory, [("PLAN_ASSERT", "db-migration")], 6, P, extractor=llm.extract_preferences) == []
        assert len(standin.bodies()) == 1
    finally:
        standin.close()
