"""The pre-review (issue 27, item 2): the person's own sentences on this artifact's lineage
and on similar past work, with their sources, ranked for the artifact, on hand-made
retrieval contexts (pure: no memory, no server)."""

from __future__ import annotations

import time

from tests.test_words_metric import tiny_replay
from vicar.eval.words import PREREVIEW
from vicar.models import AnsweredBy, ChunkSummary, GateRequest, LineageVerdict, RetrievalContext
from vicar.proxy.prereview import ARTIFACT_CHARS, WEIGHTS, RankLearner, pre_review, rank, render

ARTIFACT = "[PATCH] hwmon: (pmbus) fix sensor scale\n\n--- a/drivers/hwmon/pmbus/core.c\n+\tpmbus_read_scale(client);\n"


def request(artifact: str = ARTIFACT) -> GateRequest:
    return GateRequest(
        principal="ada",
        gate_id="g:new",
        state="WORK_ASSERT",
        task_type="pmbus",
        question="Approve or revise this patch?",
        artifact_text=artifact,
    )


def chunk(i: int, response: str, outcome: str = "correct", similarity: float = 0.5, n: int = 0) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=f"c{i}",
        state="WORK_ASSERT",
        task_type="pmbus",
        outcome=outcome,
        answered_by=AnsweredBy.human,
        human_response=response,
        created_n=n or i,
        activation=0.0,
        similarity=similarity,
        score=similarity,
    )


def ctx(chunks: list[ChunkSummary], lineage: list[LineageVerdict] = (), n: int = 100) -> RetrievalContext:  # type: ignore[assignment]
    return RetrievalContext(principal="ada", n=n, phase="posterior", chunks=chunks, lineage_history=list(lineage))


def test_the_persons_own_sentences_come_back_with_their_sources():
    c = ctx(
        [
            chunk(1, "Please add error handling for the failed read.\n\nThanks,\nAda", similarity=0.7, n=40),
            chunk(2, "Applied.", outcome="approve", similarity=0.9),
        ]
    )
    [item] = pre_review(c, request(), ARTIFACT)
    assert item.text == "Please add error handling for the failed read."  # verbatim, not paraphrased
    assert (item.chunk_id, item.n, item.action, item.similarity) == ("c1", 40, "correct", 0.7)
    assert item.concerns == ["error_handling"] and item.score > 0


def test_tags_status_lines_and_quoted_code_never_become_items():
    reply = (
        "Applied to hwmon-next.\n"
        "Reviewed-by: Guenter Roeck <linux@roeck-us.net>\n"
        "> quoted line from the patch under review here\n"
        'Something like\n\n\tvalue = pmbus_read_scale(client, page, reg);\n-\t{ "ipsps1", 0 },\n\n'
        "Will merge to 'next'.\n"
        "The return value of this call is never checked here."
    )
    items = pre_review(ctx([chunk(1, reply)]), request(), ARTIFACT)
    texts = render(items)
    assert [it.text for it in items] == ["The return value of this call is never checked here."]
    for bad in ("Applied", "Reviewed-by", "roeck-us", "quoted", "pmbus_read_scale(client, page", "ipsps1", "merge"):
        assert bad not in texts


def test_near_duplicates_are_merged_and_counted():
    c = ctx(
        [
            chunk(1, "Please run the selftests before sending this again."),
            chunk(2, "Please run the selftests before sending this one again."),
            chunk(3, "The error path leaks the buffer on failure."),
        ]
    )
    items = pre_review(c, request(), ARTIFACT)
    selftests = [it for it in items if "selftests" in it.text]
    assert len(items) == 2 and len(selftests) == 1 and selftests[0].merged == 2


def test_at_most_k_items_within_the_budget():
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
    replies = [f"The {w} sensor needs {w} handling in {w}_probe." for w in words]  # ten distinct concerns
    c = ctx([chunk(i, r) for i, r in enumerate(replies)])
    assert len(pre_review(c, request(), ARTIFACT)) == 4  # the default k
    assert len(pre_review(c, request(), ARTIFACT, k=2)) == 2
    short = pre_review(c, request(), ARTIFACT, k=10, budget=120)
    assert sum(len(it.text) for it in short) <= 120 and len(short) == 2
    assert pre_review(c, request(), ARTIFACT, k=0) == []


def test_lineage_items_outrank_unrelated_similar_ones():
    lineage = [
        LineageVerdict(chunk_id="lin", action="correct", response="Why is the offset applied twice?", n=90, ago=10)
    ]
    c = ctx([chunk(1, "The documentation of this chip is missing the units.", similarity=0.8, n=95)], lineage)
    items = pre_review(c, request(), ARTIFACT)
    assert [it.chunk_id for it in items] == ["lin", "c1"] and items[0].lineage
    assert items[0].similarity == 1.0 or items[0].features["lineage"] == 1.0


def test_a_lineage_verdict_takes_its_whole_text_from_the_retrieved_chunk():
    whole = "Short clipped head of the reply.\n\nThe second paragraph is about locking and races."
    lineage = [
        LineageVerdict(chunk_id="c1", action="correct", response="Short clipped head of the reply.", n=5, ago=95)
    ]
    items = pre_review(ctx([chunk(1, whole)], lineage), request(), ARTIFACT)
    assert {it.text for it in items} == {
        "Short clipped head of the reply.",
        "The second paragraph is about locking and races.",
    }
    assert all(it.lineage for it in items)


def test_a_sentence_naming_what_the_artifact_touches_outranks_one_that_does_not():
    c = ctx(
        [
            chunk(1, "Why does mlx_read_temp() ignore the error here?", similarity=0.6),
            chunk(2, "Why does pmbus_read_scale() ignore the error here?", similarity=0.6),
        ]
    )
    first, second = pre_review(c, request(), ARTIFACT)
    assert "pmbus_read_scale" in first.text and first.touches == ["pmbus_read_scale"]
    assert second.touches == [] or "pmbus_read_scale" not in second.touches


def test_a_test_request_ranks_higher_when_the_artifact_adds_no_test():
    c = ctx([chunk(1, "Where are the tests for this change?"), chunk(2, "The commit message should explain why.")])
    untested = pre_review(c, request(), ARTIFACT)
    assert untested[0].text.startswith("Where are the tests") and "no test" in untested[0].touches[0]
    tested = pre_review(c, request(ARTIFACT + "--- a/t/t0001-scale.sh\n"), ARTIFACT + "--- a/t/t0001-scale.sh\n")
    assert tested[0].features["touches"] < untested[0].features["touches"]


def test_corrections_outweigh_approval_remarks_and_facts_are_left_out():
    fact = chunk(3, "Prefers the error path to be tested.", outcome="correct").model_copy(update={"kind": "preference"})
    proxy = chunk(4, "The proxy said this about the error path.").model_copy(update={"answered_by": AnsweredBy.proxy})
    c = ctx(
        [
            chunk(1, "Nice cleanup, but the naming is odd.", outcome="approve"),
            chunk(2, "The error path is broken here."),
            fact,
            proxy,
        ]
    )
    items = pre_review(c, request(), ARTIFACT)
    assert [it.chunk_id for it in items] == ["c2", "c1"]


def test_the_ranking_learns_online_from_what_the_human_raises():
    c = ctx(
        [
            chunk(1, "The pmbus_read_scale() call ignores the failed read.", similarity=0.9),
            chunk(2, "The documentation of this chip lacks units.", similarity=0.95),
        ]
    )
    learner = RankLearner(weights={**WEIGHTS, "touches": 0.0})  # a ranking blind to what the artifact touches
    assert rank(c, request(), ARTIFACT, learner.weights)[0].chunk_id == "c2"  # the more similar first
    for _ in range(30):  # the person keeps asking about the failures of what the patch touches
        learner.update(rank(c, request(), ARTIFACT, learner.weights), "This read can fail: handle the error.")
    assert learner.updates == 30 and learner.weights["touches"] > 0.0
    assert rank(c, request(), ARTIFACT, learner.weights)[0].chunk_id == "c1"
    assert RankLearner.model_validate_json(learner.model_dump_json()) == learner  # a pure object to keep


def test_empty_memory_gives_an_empty_pre_review():
    assert pre_review(ctx([]), request(), ARTIFACT) == []
    assert pre_review(ctx([chunk(1, "Applied, thanks.", outcome="approve")]), request(), ARTIFACT) == []
    assert render([]) == ""


def test_its_work_does_not_grow_with_the_artifact():
    """A full context and a 10 MB diff cost about what a diff just past the length read
    costs: the artifact is read up to a fixed length, so its cost stops growing there (a
    ratio in one run, the least of a few runs each so a busy machine's pause is not read
    as growth; not a speed goal: those live in bench/)."""
    replies = [f"Reply {i}: the error path of probe_{i}() leaks.\n\n" * 6 for i in range(10)]
    c = ctx(
        [chunk(i, r) for i, r in enumerate(replies)],
        [LineageVerdict(chunk_id="l", action="reject", response=replies[0], n=1, ago=99)],
    )

    def per_call(artifact: str) -> float:
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(4):
                pre_review(c, request(), artifact)
            runs.append((time.perf_counter() - start) / 4)
        return min(runs)

    past_the_cap = ARTIFACT * (2 * ARTIFACT_CHARS // len(ARTIFACT) + 1)
    huge = ARTIFACT * 100_000  # about 10 MB
    per_call(past_the_cap)  # warm the regexes
    assert per_call(huge) < 2 * per_call(past_the_cap) + 0.002


def test_the_replay_report_carries_the_pre_review(tmp_path, monkeypatch):
    report, res = tiny_replay(tmp_path, monkeypatch)
    assert f"| default: {PREREVIEW} | all (pooled) |" in report
    pre = res["words"][PREREVIEW]["pooled"]
    # From the second correction on, the person's "Please fix the error path." is in memory.
    assert pre["events"] == 6 and pre["recall"] > 0.5 and pre["raised"] <= 4
    assert 0 < res["prereview_items"]["all"] <= 4 and "pre-review items per correct/reject event" in report


def test_the_gate_reads_the_persons_answers_on_similar_work_in_other_contexts(memory, settings):
    """The gate's retrieval keeps to one state and task type; the person's correction of
    the most similar past artifact, given under another task type, still reaches the
    pre-review through the posterior's similar-work search (one principal's memory, the
    past only)."""
    from tests.conftest import record_answer
    from vicar.proxy.retrieval import retrieve

    diff = "--- a/drivers/hwmon/lm90.c\n+++ b/drivers/hwmon/lm90.c\n+\tval = lm90_read_reg(client, LM90_REG_TEMP);\n"
    said = "The error returned by lm90_read_reg() is ignored here."

    def req(gate_id: str, task_type: str, artifact: str) -> GateRequest:
        return GateRequest(
            principal="alice",
            gate_id=gate_id,
            state="WORK_ASSERT",
            task_type=task_type,
            question="Approve or revise the overall deliverable.",
            artifact_text=artifact,
        )

    record_answer(memory, req("g-old", "hwmon-driver", diff), 1, "correct", said, predicted="correct")
    record_answer(memory, req("g-docs", "docs", "Fix a typo in the README."), 2, "approve", "Applied.")
    # One answer of the gate's own task type: a small memory with none would borrow every
    # task type's answers (retrieval's fallback), which is not what this reads.
    record_answer(memory, req("g-fix0", "hwmon-fix", "Bump the copyright year."), 3, "approve", "Fine.")
    new = req("g-new", "hwmon-fix", diff.replace("TEMP", "TEMP2"))
    ctx = retrieve(memory, new, 4, "posterior", new.artifact_text, settings.retrieval, settings.calibration)
    assert not [c for c in ctx.chunks if c.gate_id == "g-old"], "another task type: not retrieved"
    assert [c.gate_id for c in ctx.similar_work][:1] == ["g-old"]
    items = pre_review(ctx, new, new.artifact_text)
    assert [(it.text, it.gate_id, it.action) for it in items][:1] == [(said, "g-old", "correct")]
    # The prior pass has no artifact yet: no similar work.
    assert retrieve(memory, new, 4, "prior", options=settings.retrieval).similar_work == []
