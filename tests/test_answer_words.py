"""The proxy's answer built from the pre-review (issue 27, item 3): pure rules on hand-made
items, then the consult path on a real memory (the real embedding model, real Chroma),
then a real gate on the Temporal dev server carrying the pre-review in its details and
its result."""

from __future__ import annotations

import asyncio

from temporalio.common import WorkflowIDReusePolicy

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.models import Action, AnsweredBy, GateResult, HumanAnswer
from vicar.models.prereview import PreReviewItem
from vicar.proxy.answer_words import answer_text
from vicar.proxy.consult import consult
from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.prereview import PreReviewItem as ReExported

from .conftest import record_answer, wait_escalated

ARTIFACT = "ALTER TABLE orders ADD COLUMN total numeric;\n-- migration 0042 for the orders table\n"
SAID = [
    "Where is the rollback step for the orders migration?",
    "This migration has no test for the orders table.",
    "The error path of the orders migration is never checked.",
]


def item(text: str, score: float = 1.0) -> PreReviewItem:
    return PreReviewItem(text=text, score=score, chunk_id="c", gate_id="g-old", n=1, action="correct")


def test_the_item_is_one_model_wherever_it_is_imported():
    assert ReExported is PreReviewItem


def test_a_correction_is_the_persons_items_and_approval_keeps_its_own_words():
    items = [item("Add a test for the empty table."), item("Why is the lock taken twice?", 0.5)]
    assert (
        answer_text(Action.correct, items, "canned")
        == "Add a test for the empty table.\n\nWhy is the lock taken twice?"
    )
    assert answer_text(Action.reject, items, "canned").startswith("Add a test")
    assert answer_text(Action.approve, items, "Looks good, applied.") == "Looks good, applied."
    assert answer_text(Action.correct, [], "canned") == "canned"  # nothing of theirs: today's text
    assert answer_text(Action.hold, items, "Not yet.") == "Not yet."


def test_a_probe_is_one_question_of_theirs():
    items = [item("Add a test for the empty table."), item("Why is the lock taken twice?", 0.5)]
    assert answer_text(Action.dialog, items, "What is the plan?") == "Why is the lock taken twice?"
    assert answer_text(Action.dialog, items[:1], "What is the plan?") == "What is the plan?"


def _seeded(memory, harness_request, principal: str) -> None:
    for i, text in enumerate(SAID, 1):
        req = harness_request(principal, gate_id=f"g-past-{i}")
        record_answer(memory, req, i, "correct", text + "\n\nThanks,\nAda", predicted="correct")


def test_the_consult_path_answers_a_correction_in_the_persons_words(memory, settings):
    from vicar.models import GateRequest

    def req(principal: str, **kw) -> GateRequest:
        return GateRequest(
            principal=principal,
            gate_id=kw.pop("gate_id", "g-new"),
            state="PLAN_ASSERT",
            task_type="db-migration",
            question="Approve or revise the proposed plan.",
            artifact_text=ARTIFACT,
        )

    _seeded(memory, req, "alice")
    c = consult(memory, LearnedPredictor(settings.predictor), req("alice"), 4, settings, artifact=ARTIFACT)
    post = c.posterior
    assert post.action is Action.correct
    assert post.prereview, "the posterior carries the gate's pre-review"
    said = set(SAID)
    assert {it.text for it in post.prereview} <= said
    assert {it.gate_id for it in post.prereview} <= {"g-past-1", "g-past-2", "g-past-3"}
    # The words the agent would receive: the items, each as the person said it.
    assert post.prose.split("\n\n") == [it.text for it in post.prereview]
    assert "Thanks" not in post.prose


async def test_a_gate_shows_and_returns_its_pre_review(harness):
    principal = harness.principal()
    memory = harness.registry.get(principal)

    def req(principal: str, **kw):
        return harness.request(principal, artifact=ARTIFACT, **kw)

    _seeded(memory, req, principal)
    # Answered by the proxy alone: the correction the agent receives is the person's words.
    alone = req(principal, escalation_mode="never")
    result = await (await start_gate(harness.client, alone, harness.task_queue)).result()
    assert result.answered_by is AnsweredBy.proxy and result.action is Action.correct
    assert result.prereview and result.text.split("\n\n") == [it.text for it in result.prereview]
    assert all(it.gate_id.startswith("g-past-") for it in result.prereview)
    # Escalated: the human sees the person's own past concerns beside the proxy's guess.
    asked = req(principal, escalation_mode="always")
    handle = await start_gate(harness.client, asked, harness.task_queue)
    details = await wait_escalated(harness.client, asked.gate_id)
    assert details.prereview and {it.text for it in details.prereview} <= set(SAID)
    assert details.proxy_text.split("\n\n") == [it.text for it in details.prereview]
    await answer_gate(harness.client, asked.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
    result = await handle.result()
    assert result.answered_by is AnsweredBy.human
    assert [it.text for it in result.prereview] == [it.text for it in details.prereview]
    # The same gate id started again returns the recorded run's result, pre-review included.
    again = await harness.client.start_workflow(
        c.GATE_WORKFLOW,
        asked,
        id=c.gate_workflow_id(asked.gate_id),
        task_queue=harness.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        result_type=GateResult,
    )
    second = await asyncio.wait_for(again.result(), 30)
    assert [it.text for it in second.prereview] == [it.text for it in result.prereview]


def test_the_answer_reads_further_down_the_ranking_than_the_pre_review_shows():
    from vicar.models import AnsweredBy, ChunkSummary, GateRequest, RetrievalContext
    from vicar.proxy.offline import OfflinePredictor
    from vicar.proxy.prereview import DEFAULT_K

    said = [
        "Where is the rollback step for this migration?",
        "The error path of the lock is never checked.",
        "Please add a test for the empty orders table.",
        "Document why the column is nullable in the changelog.",
        "This races with the nightly vacuum job.",
        "Split the index build into its own patch.",
        "Which firmware version needs the workaround?",
    ]
    chunks = [
        ChunkSummary(
            chunk_id=f"c{i}",
            gate_id=f"g{i}",
            state="PLAN_ASSERT",
            task_type="db-migration",
            outcome="correct",
            answered_by=AnsweredBy.human,
            human_response=text,
            created_n=i,
            activation=0.5,
            similarity=0.9,
            score=0.9,
        )
        for i, text in enumerate(said, 1)
    ]
    req = GateRequest(
        principal="alice", gate_id="g-new", state="PLAN_ASSERT", task_type="db-migration", question="Approve?"
    )
    ctx = RetrievalContext(principal="alice", n=10, phase="posterior", chunks=chunks)
    offline = OfflinePredictor()
    post = offline.posterior(req, ctx, ARTIFACT, offline.prior(req, ctx))
    assert post.action is Action.correct
    assert len(post.prereview) == DEFAULT_K  # what the gate shows
    answer = post.prose.split("\n\n")
    assert answer[:DEFAULT_K] == [it.text for it in post.prereview] and set(answer) == set(said)


ASKED = "Can the orders migration be rolled back without losing the totals?"


async def test_an_intent_gate_probes_with_the_question_the_person_asked_on_similar_work(harness):
    """At INTENT_ASSERT the proxy probes before it decides (the design's probe rule): the
    memory predictors' probe is the person's own question from the pre-review, word for
    word, put to the agent as the gate's first dialog line; then the proxy decides."""
    principal = harness.principal()
    memory = harness.registry.get(principal)

    def req(**kw):
        return harness.request(
            principal, artifact=ARTIFACT, state="INTENT_ASSERT", question="Approve or revise the proposed intent.", **kw
        )

    past = [ASKED, SAID[1], SAID[2]]  # one question among the corrections on similar work
    for i, text in enumerate(past, 1):
        record_answer(
            memory, req(gate_id=f"g-intent-{i}"), i, "correct", text + "\n\nThanks,\nAda", predicted="correct"
        )
    gate = req(escalation_mode="never", actor_message="The intent: add a total column to orders.")
    result = await (await start_gate(harness.client, gate, harness.task_queue)).result()
    assert result.answered_by is AnsweredBy.proxy
    asked = [t for t in result.dialog if t.speaker == "reviewer"]
    assert asked and asked[0].text == ASKED and asked[0].answered_by is AnsweredBy.proxy
    assert result.dialog[1].speaker == "agent" and result.dialog[1].text == gate.actor_message
    # Asked once: with the agent's reply in the dialog, the proxy decides in the person's words.
    assert len(asked) == 1 and result.action is Action.correct
    assert set(result.text.split("\n\n")) <= set(past)
