"""record_outcome's bookkeeping and its three artifacts (real SQLite, Chroma, embedder)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, DialogTurn, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.bookkeeping import ContextEntry, apply_outcome, concerns_in, questions_in
from vicar.proxy.outcomes import CONFIDENCE_FILE, INTERACTIONS_FILE, PATTERNS_FILE, record_outcome
from vicar.settings import MemoryParams

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def outcome(
    i: int,
    action="approve",
    by=AnsweredBy.human,
    predicted="approve",
    text="Fine.",
    task_type="db-migration",
    dialog=(),
) -> OutcomeRecord:
    req = GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type=task_type,
        question="Approve or revise the proposed plan.",
        artifact_text="x" * (100 + i),
        actor_message="Plan ready.",
    )
    guess = PassResult(prose=f"predicted {predicted}", confidence=0.7, action=Action(predicted) if predicted else None)
    return OutcomeRecord(
        request=req,
        n=i,
        workflow_id=f"vicar-gate/g{i}",
        action=Action(action),
        response_text=text,
        answered_by=by,
        prior=guess,
        posterior=guess,
        at=T0 + timedelta(hours=i),
        dialog=list(dialog),
    )


def test_counters_ema_and_accuracy_learn_only_from_humans():
    e = None
    e = apply_outcome(e, outcome(1, "approve", predicted="approve"))
    e = apply_outcome(e, outcome(2, "correct", predicted="approve", text="What is the rollback? Add tests."))
    e = apply_outcome(e, outcome(3, "approve", by=AnsweredBy.proxy))
    assert (e.approve_count, e.correct_count, e.total_count, e.proxy_answer_count) == (1, 1, 2, 1)
    # EMA: 1.0, then a correction weighs three approvals: 0.7^3 * 1.0 = 0.343.
    assert e.ema_approval_rate == pytest.approx(0.343)
    assert (e.prediction_correct_count, e.prediction_total_count) == (1, 2)
    assert (e.prior_correct_count, e.prior_total_count) == (1, 2)
    assert e.last_updated == "2026-11-01" and e.last_human_at == T0 + timedelta(hours=2)
    d = e.differentials[-1]
    assert (d.outcome, d.summary, d.predicted_response) == (
        "correct",
        "What is the rollback? Add tests.",
        "predicted approve",
    )
    assert [q.question for q in e.question_patterns] == ["What is the rollback?"]
    assert e.question_patterns[0].concerns == ["rollback"]
    assert e.artifact_lengths == [101, 102]


def test_an_approval_weighs_once_in_the_ema():
    e = apply_outcome(apply_outcome(None, outcome(1, "correct")), outcome(2, "approve"))
    assert e.ema_approval_rate == pytest.approx(0.3)


def test_bounded_lists_keep_the_newest():
    e = None
    for i in range(30):
        e = apply_outcome(e, outcome(i, "correct", text=f"Question {i}?"))
    assert len(e.differentials) == 20 and e.differentials[-1].summary == "Question 29?"
    assert len(e.question_patterns) == 20 and len(e.artifact_lengths) == 20


def test_concern_vocabulary():
    assert concerns_in("Is this idempotent on retry? What if the migration fails?") == ["error_handling", "idempotency"]
    assert questions_in("Looks fine. Did you run the tests? ok") == ["Did you run the tests?"]


@pytest.fixture
def memory(tmp_path, embedder):
    m = PrincipalMemory("alice", tmp_path, embedder, MemoryParams())
    yield m
    m.close()


def test_record_outcome_is_idempotent_and_writes_three_artifacts(memory):
    rec = outcome(
        1,
        "correct",
        text="Add a rollback step?",
        dialog=[
            DialogTurn(speaker="reviewer", text="Why now?", answered_by=AnsweredBy.proxy),
            DialogTurn(speaker="agent", text="The release is Friday."),
        ],
    )
    cid = record_outcome(memory, rec)
    assert record_outcome(memory, rec) == cid  # Temporal retried the activity
    record_outcome(memory, outcome(2, "approve", by=AnsweredBy.proxy))
    conf = json.loads((memory.dir / CONFIDENCE_FILE).read_text())
    assert conf["global_threshold"] == 0.8 and conf["generative_threshold"] == 0.95
    entry = ContextEntry.model_validate(conf["entries"]["PLAN_ASSERT|db-migration"])
    assert (entry.correct_count, entry.total_count, entry.proxy_answer_count) == (1, 1, 1)
    lines = [json.loads(x) for x in (memory.dir / INTERACTIONS_FILE).read_text().splitlines()]
    assert [x["workflow_id"] for x in lines] == ["vicar-gate/g1", "vicar-gate/g2"]
    assert lines[0]["answered_by"] == "human" and lines[1]["answered_by"] == "proxy"
    patterns = (memory.dir / PATTERNS_FILE).read_text()
    assert "AGENT: Plan ready." in patterns and "HUMAN (proxy): Why now?" in patterns
    assert "AGENT: The release is Friday." in patterns and "HUMAN: [correct] Add a rollback step?" in patterns
    assert "HUMAN (proxy): [approve]" in patterns
    assert memory.stats().chunks == 2


def test_interactions_file_heals_after_a_crash(memory):
    for i in range(1, 4):
        record_outcome(memory, outcome(i))
    path = memory.dir / INTERACTIONS_FILE
    lines = path.read_text().splitlines()
    # A crash mid-append: the third line is torn, and the fourth outcome never got written.
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:15])
    patterns = memory.dir / PATTERNS_FILE
    text = patterns.read_text()
    patterns.write_text(text[: text.rindex("HUMAN: [approve]") + 5])  # the third gate's section torn
    record_outcome(memory, outcome(4))
    got = [json.loads(x)["workflow_id"] for x in path.read_text().splitlines()]
    assert got == [f"vicar-gate/g{i}" for i in range(1, 5)]
    healed = patterns.read_text()
    assert [f"| g{i} (" in healed for i in range(1, 5)] == [True] * 4
    assert healed.count("## PLAN_ASSERT") == 4 and healed.count("<!-- outcome ") == 4


def test_confidence_file_is_replaced_atomically(memory, monkeypatch):
    record_outcome(memory, outcome(1))
    before = (memory.dir / CONFIDENCE_FILE).read_text()
    import vicar.proxy.outcomes as outcomes

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(outcomes.os, "replace", broken_replace)
    with pytest.raises(OSError):
        record_outcome(memory, outcome(2))
    # The old file is intact (no torn JSON), and no temp file is left behind.
    assert (memory.dir / CONFIDENCE_FILE).read_text() == before
    assert not list(memory.dir.glob(".proxy-confidence.json.*"))
    monkeypatch.undo()
    record_outcome(memory, outcome(3))  # the next write brings everything up to date
    conf = json.loads((memory.dir / CONFIDENCE_FILE).read_text())
    assert conf["entries"]["PLAN_ASSERT|db-migration"]["total_count"] == 3


def test_the_last_line_is_found_past_short_reads(tmp_path):
    """The resume point is read from the end in growing blocks: a last entry longer
    than the first block, blank lines after it, and a file with one line all give the
    whole last non-blank line."""
    from vicar.proxy.outcomes import LAST_LINE_BLOCK, _last_line

    path = tmp_path / "log.jsonl"
    long_entry = "z" * (3 * LAST_LINE_BLOCK + 17)
    path.write_text(f"first\n{long_entry}\n  \n\n")
    assert _last_line(path) == long_entry
    path.write_text(long_entry)
    assert _last_line(path) == long_entry
    path.write_text("a\nb\n")
    assert _last_line(path) == "b"
    path.write_text("\n \n")
    assert _last_line(path) == ""
