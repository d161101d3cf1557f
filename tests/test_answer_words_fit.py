"""The proxy's shown words never turn against its shown action (issue 46): a reject is
not worded with an approval's "Fine, ship it.", nor with sentences said on another kind
of work; an approve does not say "the rollback step is clear" of a plan that says it has
none, nor ask a question it then waves through. Pure rules on hand-made items and
contexts; the inbox shows the same rule's result (tests/test_inbox_third_pass.py)."""

from __future__ import annotations

from vicar.models import Action, AnsweredBy, ChunkSummary, GateRequest, PassResult, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy.answer_words import DEFAULT_TEXT, answer_text, with_prereview
from vicar.proxy.concerns import fitting_words


def item(text: str, action: str = "reject", other: bool = False, score: float = 1.0) -> PreReviewItem:
    return PreReviewItem(
        text=text,
        score=score,
        chunk_id="c",
        n=1,
        action=action,
        task_type="deps" if other else "docs",
        other_work=other,
    )


def test_a_reject_is_worded_only_with_turned_back_words_of_this_kind_of_work():
    items = [
        item("Fine, ship it.", action="approve", score=3.0),
        item("What's the rollback plan for the guide?", score=2.5),
        item("Fine for a patch bump with green CI.", action="approve", other=True, score=2.0),
        item("Add a changelog entry for the bump.", other=True, score=1.5),
        item("Fine, but the link to the old page is dead.", score=1.0),  # a turn-back that opens kindly
    ]
    said = answer_text(Action.reject, items, "canned")
    assert said == "What's the rollback plan for the guide?\n\nFine, but the link to the old page is dead."
    # Nothing of theirs fits: the predictor's own words, if they do not turn against it.
    assert answer_text(Action.reject, items[:1], "No: it breaks the build.") == "No: it breaks the build."
    assert answer_text(Action.correct, items[:1], "Fine, ship it.") == ""


def test_an_approve_never_asks_or_vouches_for_what_the_artifact_lacks():
    plan = "Plan: migrate the orders table.\nNo rollback step."
    assert fitting_words(Action.approve, "Approved: the rollback step is clear.", plan) == ""
    assert (
        fitting_words(Action.approve, "Approved: the rollback step is clear.", "Plan: migrate; rollback: drop col.")
        == "Approved: the rollback step is clear."
    )
    assert fitting_words(Action.approve, "Looks good. What's the rollback plan?", plan) == "Looks good."
    assert fitting_words(Action.approve, "No: it drops the audit log.", "") == ""
    assert fitting_words(Action.reject, "Fine, ship it. What's the rollback plan?", "") == "What's the rollback plan?"
    assert fitting_words(Action.hold, "Not yet.", "") == "Not yet."  # neither an approve nor a turn-back


def _chunk(cid: str, task_type: str, outcome: str, said: str) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=cid,
        state="WORK_ASSERT",
        task_type=task_type,
        outcome=outcome,
        answered_by=AnsweredBy.human,
        human_response=said,
        created_n=1,
        activation=0.0,
        similarity=0.9,
        score=0.9,
    )


def test_an_approve_said_on_another_kind_of_work_is_not_shown_as_this_ones():
    req = GateRequest(
        principal="p", gate_id="g", state="WORK_ASSERT", task_type="docs", question="Merge?", artifact_text="Fix typo."
    )
    other = RetrievalContext(
        principal="p", n=5, phase="posterior", chunks=[_chunk("c1", "deps", "approve", "Fine for a patch bump.")]
    )
    same = other.model_copy(update={"chunks": [_chunk("c1", "docs", "approve", "Docs-only, fine.")]})
    guess = PassResult(prose="Fine for a patch bump.", confidence=0.9, action=Action.approve, used_chunk_ids=["c1"])
    # Not the other work's words: the action's plain ones (as where the person said none).
    assert with_prereview(guess, req, other, req.artifact_text).prose == DEFAULT_TEXT[Action.approve]
    mine = guess.model_copy(update={"prose": "Docs-only, fine."})
    assert with_prereview(mine, req, same, req.artifact_text).prose == "Docs-only, fine."
