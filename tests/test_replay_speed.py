"""The replay fast again (issue 39, item 3): the pre-review's work per gate is bounded and
exactly what it was: the duplicate search finds the same first duplicate as a scan of
every kept sentence, a reply's sentences are worked out once, and ranking the same
context again (the consult's words, the report, the learned ranking) costs no new
candidate work."""

from __future__ import annotations

import random
import time

from tests.test_prereview import chunk, request
from vicar.models import RetrievalContext
from vicar.proxy import prereview
from vicar.proxy.prereview import DUPLICATE, _candidates, _jaccard, _parsed, _Source, rank

WORDS = "scale sensor pmbus read error value probe clock lock mutex return check test device driver".split()


def _scan(sources: list[_Source]) -> list[tuple[str, str, int]]:
    """The duplicate search as it was: every kept sentence, in order."""
    out: list[list] = []
    for src in sources:
        for sent in _parsed(src.text)[1]:
            same = next(
                (o for o in out if o[0].idents == sent.idents and _jaccard(o[0].tokens, sent.tokens) >= DUPLICATE),
                None,
            )
            if same is None:
                out.append([sent, src, 1])
            elif same[1] is not src:
                same[2] += 1
    return [(o[0].text, o[1].chunk_id, o[2]) for o in out]


def _reply(rng: random.Random) -> str:
    # Few words, so many sentences are near duplicates of each other (and some name a call).
    return " ".join(
        " ".join(rng.choices(WORDS[:6], k=rng.randint(3, 9))) + rng.choice(["", " pmbus_read()", " do_probe()"]) + "."
        for _ in range(rng.randint(1, 12))
    )


def test_the_indexed_duplicate_search_finds_what_the_scan_found():
    rng = random.Random(7)
    merged = 0
    for trial in range(40):
        sources = [_Source(f"c{trial}-{i}", _reply(rng), "correct", i, 0.5, False) for i in range(rng.randint(1, 15))]
        got = [(c.sentence.text, c.source.chunk_id, c.merged) for c in _candidates(sources)]
        assert got == _scan(sources)
        merged += sum(m > 1 for _, _, m in got)
    assert merged > 20  # near duplicates were there to find: the comparison is not vacuous


def test_the_same_context_ranked_again_costs_no_new_candidate_work(monkeypatch):
    ctx = RetrievalContext(
        principal="ada",
        n=900,
        phase="posterior",
        chunks=[chunk(i, _reply(random.Random(i)) * 3, similarity=0.5) for i in range(12)],
    )
    req = request()
    calls = []
    real = prereview._featured
    monkeypatch.setattr(prereview, "_featured", lambda *a: calls.append(1) or real(*a))
    first = rank(ctx, req, req.artifact_text)
    again = rank(ctx, req, req.artifact_text)
    learned = rank(ctx, req, req.artifact_text, {**prereview.WEIGHTS, "often": 3.0})
    assert len(calls) == 1
    assert [it.model_dump() for it in again] == [it.model_dump() for it in first]
    assert {it.text for it in learned} == {it.text for it in first}
    # Another context (a new consult) is ranked afresh, never served the last one's items.
    other = ctx.model_copy(update={"chunks": ctx.chunks[:1]})
    assert len(rank(other, req, req.artifact_text)) < len(first)
    assert len(calls) == 2


def test_the_pre_review_of_a_long_history_stays_fast():
    # Sixty replies of sixty sentences each, their words drawn as English's are (Zipf's
    # law over 3,000 words): 3,600 candidates, where the scan compared each with every
    # kept one. Seen taking 30 s before (on a loaded machine), about 1 s now.
    rng = random.Random(3)
    vocab = [f"word{i}" for i in range(3000)]
    zipf = [1.0 / (i + 1) for i in range(3000)]
    ctx = RetrievalContext(
        principal="ada",
        n=5000,
        phase="posterior",
        chunks=[
            chunk(i, " ".join(" ".join(rng.choices(vocab, zipf, k=rng.randint(5, 25))) + "." for _ in range(60)))
            for i in range(60)
        ],
    )
    req = request()
    t0 = time.perf_counter()
    items = rank(ctx, req, req.artifact_text)
    elapsed = time.perf_counter() - t0
    assert len(items) > 3000
    assert elapsed < 5.0, elapsed


def _events(n: int) -> list:
    from tests.test_words_metric import event

    rng = random.Random(5)
    replies = ["Applied.", "The error path is wrong.", "Please add a test for the probe.", "Thanks, queued.", ""]
    return [event(i, rng.choice(["approve", "correct", "reject"]), rng.choice(replies)) for i in range(n)]


def test_a_variants_baseline_is_built_without_the_similar_search(embedder):
    from vicar.eval import words as w

    events = _events(60)
    predicted = [random.Random(i).choice(["approve", "correct", None]) for i in range(60)]
    assert w.for_action(events, predicted) == w.baselines(events, embedder, predicted)[w.FOR_ACTION]


def test_the_words_metrics_score_the_same_with_their_texts_embedded_first(embedder):
    from vicar.eval import words as w

    events = {"Ada Tester": _events(40)}
    texts = {"p": {"Ada Tester": [e.response + " Check the lock." for e in events["Ada Tester"]]}}
    needed = w.words_texts(events, texts)
    # The dataset's own part (embedded with the dataset on a cold run) is in it.
    assert set(w.words_texts(events)) <= set(needed)
    vectors = dict(zip(needed, embedder.embed(needed)))
    assert w.score_words(events, texts, embedder, vectors=vectors) == w.score_words(events, texts, embedder)


def test_the_most_similar_past_replies_are_those_a_full_stable_sort_puts_first():
    import numpy as np

    from vicar.eval.words import _most_similar

    rng = np.random.default_rng(0)
    for size in (1, 3, 5, 6, 50, 400):
        for _ in range(20):
            sims = rng.choice([0.1, 0.5, 0.9], size=size) if size > 10 else rng.random(size)  # ties, then none
            want = np.argsort(-sims, kind="stable")[:5]
            assert list(_most_similar(sims, 5)) == list(want)
