"""The learned pass's words (History.words): the human's words for each action the model
can answer, kept per context and action until those answers change. Whatever the kept
copy, the words are the ones read from the answers themselves: the last verdict on the
lineage when it was that action, else the most frequent words for the action in the
context (ties to the greater), else anywhere."""

from __future__ import annotations

import random

from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord
from vicar.proxy import learned_history as H

ACTIONS = (Action.approve, Action.correct, Action.reject, Action.hold)
REPLIES = tuple(
    "looks good; needs tests; please rebase; wrong approach; split this up; fix the commit message; "
    "what about errors; not now; ship it; document the option; too large; ask upstream".split("; ")
)


def request(i: int, rng: random.Random) -> GateRequest:
    topic = rng.randrange(8)
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="WORK_ASSERT",
        task_type=rng.choice(("docs", "tests", "build")),
        question="Approve this patch?",
        title=f"[PATCH v{rng.randrange(1, 4)}] topic {topic}",
        artifact_text=f"change {i} to topic {topic}",
    )


def read_from_the_answers(history: H.History, req: GateRequest, action: Action) -> str:
    lin = H.lineage_of(req)
    past = history.lineages.get(lin.lineage) if lin.lineage else None
    if past and past[-1].action is action and past[-1].response.strip():
        return past[-1].response.strip()
    for key in (H._context(req), "all"):
        said = history.responses.get((key, action))
        if said:
            return history.examples.get(max(said, key=lambda w: (said[w], w)), "")
    return ""


def test_the_words_follow_every_answer(monkeypatch):
    # A small bound, so the trimming of rare responses happens too.
    monkeypatch.setattr(H, "MAX_RESPONSE_KINDS", 6)
    rng = random.Random(3)
    history = H.History()
    checked = 0
    for i in range(600):
        req = request(i, rng)
        words = history.words(req, ACTIONS)  # asked (and kept) before this answer lands
        assert words == {a: read_from_the_answers(history, req, a) for a in ACTIONS}, i
        assert history.words(req, ACTIONS) == words  # asked again: the same
        checked += sum(bool(w) for w in words.values())
        history.observe(
            OutcomeRecord(
                request=req,
                n=i + 1,
                workflow_id=f"w{i}",
                action=rng.choice(ACTIONS),
                response_text=rng.choice(REPLIES) if rng.random() < 0.9 else "",
                answered_by=AnsweredBy.human if rng.random() < 0.8 else AnsweredBy.proxy,
            )
        )
    assert checked > 1000  # most answers had words to compare
