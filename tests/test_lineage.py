"""Lineage: derived from real titles, stored with each chunk, retrieved as exact
structural matches (most recent first, whatever the similarity), shown to the LLM,
carried through the replay; old stores migrate (real SQLite, Chroma, embedder)."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3

import pytest

import vicar.eval.replay as replay
from vicar.eval.dataset import load_events
from vicar.llm.anthropic_client import AnthropicClient
from vicar.memory.principal import PrincipalMemory
from vicar.memory.store import _COLUMNS, MIGRATIONS
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord
from vicar.proxy.consult import consult
from vicar.proxy.lineage import artifact_hash, derive
from vicar.proxy.llm_predictor import LLMPredictor
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.outcomes import outcome_chunk, record_outcome
from vicar.proxy.retrieval import retrieve
from vicar.settings import MemoryParams, RetrievalOptions, Settings

from .llm_standins import AnthropicStandIn
from .test_eval import DATA

LINEAGE_COLUMNS = ("lineage", "revision", "artifact_hash")


@pytest.fixture(scope="module")
def dataset_rows() -> dict[str, list[dict]]:
    if DATA is None:
        pytest.fail(
            "the gate-replay dataset (shared/datasets/gate-replay/dev) is not beside the checkout; "
            "set VICAR_GATE_REPLAY_DIR"
        )
    rows = {}
    for name in ("lkml-hwmon", "git-whats-cooking"):
        with gzip.open(DATA / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            rows[name] = [json.loads(line) for line in fh if line.strip()]
    return rows


# -- derivation on real titles ---------------------------------------------------------

_TAG_VERSION = re.compile(r"^\[(PATCH[^\]]*?)\bv(\d+)\b")


def test_lineage_of_real_patch_titles(dataset_rows):
    titles = {r["artifact_title"] for r in dataset_rows["lkml-hwmon"]}
    versioned = 0
    revisions: dict[str, set[str]] = {}
    for title in titles:
        d = derive(title)
        assert d.lineage and not d.lineage.startswith(("[", "Re:", "re:")), title
        revisions.setdefault(d.lineage, set()).add(d.revision)
        m = _TAG_VERSION.match(title)
        if m:
            versioned += 1
            v = int(m.group(2))
            assert d.revision == f"v{v}", title
            # The reply to the next reroll: the same thread, one revision on.
            reroll = "Re: " + title[: m.start(2)] + str(v + 1) + title[m.end(2) :]
            r = derive(reroll)
            assert (r.lineage, r.revision) == (d.lineage, f"v{v + 1}"), (title, reroll)
            assert (r.position, r.series_size) == (d.position, d.series_size)
    assert versioned > 100
    # The archive itself holds threads seen at several revisions.
    assert sum(len(revs) > 1 for revs in revisions.values()) > 100
    d = derive("[PATCH v3 2/5] hwmon: (lm75) Add support for TMP75B")
    r = derive("Re: [PATCH v4 2/5] hwmon: (lm75)  Add support for TMP75B")
    assert (d.lineage, d.revision, d.position, d.series_size) == ("hwmon: (lm75) Add support for TMP75B", "v3", 2, 5)
    assert (r.lineage, r.revision) == (d.lineage, "v4")


def test_git_topics_are_their_own_lineage(dataset_rows):
    topics = {r["artifact_title"] for r in dataset_rows["git-whats-cooking"]}
    assert len(topics) > 1000
    for topic in topics:
        d = derive(topic)
        assert (d.lineage, d.revision) == (topic, ""), topic
        assert "/" in topic


# -- store and retrieval ----------------------------------------------------------------

QUESTION = "Approve or revise this patch"
SIMILAR = "Please review the new regulator driver for the PMBus power supply and its device tree binding."


def gate(i: int, title: str, artifact: str, question: str = QUESTION, actor: str = "") -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="WORK_ASSERT",
        task_type="hwmon",
        question=question,
        artifact_text=artifact,
        actor_message=actor,
        title=title,
    )


def answer(
    mem: PrincipalMemory, i: int, req: GateRequest, action: str, text: str, by: AnsweredBy = AnsweredBy.human
) -> None:
    record_outcome(
        mem,
        OutcomeRecord(
            request=req, n=i, workflow_id=f"vicar-gate/g{i}", action=Action(action), response_text=text, answered_by=by
        ),
        artifacts=False,
    )


def v(title_version: int) -> str:
    return f"[PATCH v{title_version} 2/3] hwmon: (lm75) Add support for TMP75B"


PATCH_V1 = "Add TMP75B to the lm75 driver: new chip id, conversion rate 12 bits."
PATCH_V3 = "Add TMP75B to the lm75 driver: new chip id, configuration register updated."


@pytest.fixture
def thread_memory(settings, embedder):
    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    answer(mem, 1, gate(1, v(1), PATCH_V1), "correct", "The configuration register is not updated.")
    answer(mem, 2, gate(2, v(2), PATCH_V1 + " Fixed style."), "correct", "Expecting a reroll.")
    answer(mem, 3, gate(3, f"Re: {v(2)}", PATCH_V1 + " Fixed style."), "hold", "Let me check the datasheet.")
    answer(mem, 4, gate(4, v(3), PATCH_V3), "approve", "Applied to hwmon-next.", by=AnsweredBy.proxy)
    answer(mem, 5, gate(5, v(3), PATCH_V3), "approve", "Applied to hwmon-next.")
    # Another thread, written to be far closer to the next gate's text.
    answer(
        mem,
        6,
        gate(6, "[PATCH] regulator: pmbus: new driver", SIMILAR, question=SIMILAR, actor=SIMILAR),
        "reject",
        "Wrong subsystem.",
    )
    yield mem
    mem.close()


def test_latest_verdicts_on_the_same_lineage_most_recent_first(thread_memory):
    mem = thread_memory
    nxt = gate(8, f"Re: {v(3)}", PATCH_V3, question=SIMILAR, actor=SIMILAR)
    post = retrieve(mem, nxt, 8, "posterior", PATCH_V3)
    hist = post.lineage_history
    # The three latest human verdicts on A, newest first; the proxy's answer and B are not among them.
    assert [(h.n, h.ago, h.action, h.revision) for h in hist] == [
        (5, 3, "approve", "v3"),
        (3, 5, "hold", "v2"),
        (2, 6, "correct", "v2"),
    ]
    assert [h.changed_since for h in hist] == [False, True, True]  # the same artifact as at n=5
    assert hist[0].response == "Applied to hwmon-next."
    # B is the most similar memory by far, and still no verdict on this thread.
    by_id = {c.chunk_id: c for c in post.chunks}
    b = next(c for c in post.chunks if c.outcome == "reject")
    assert all(b.similarity > c.similarity for c in post.chunks if c is not b)
    assert b.chunk_id not in {h.chunk_id for h in hist}
    assert set(by_id) >= {h.chunk_id for h in hist}  # the ranking itself is unchanged beside them
    edited = retrieve(mem, nxt, 8, "posterior", PATCH_V3 + " And a test.")
    assert [h.changed_since for h in edited.lineage_history] == [True, True, True]
    # The prior has not read the artifact: whether it changed is not told there.
    prior = retrieve(mem, nxt, 8, "prior")
    assert [(h.n, h.changed_since) for h in prior.lineage_history] == [(5, None), (3, None), (2, None)]
    # Only what came before this gate's N; a lineage never seen matches nothing.
    assert [h.n for h in retrieve(mem, nxt, 3, "prior").lineage_history] == [2, 1]
    assert (
        retrieve(mem, gate(9, "[PATCH] hwmon: (lm90) Other", PATCH_V3), 9, "posterior", PATCH_V3).lineage_history == []
    )


def test_lineage_verdicts_ignore_activation_and_can_be_turned_off(thread_memory):
    mem = thread_memory
    mem.params = mem.params.model_copy(update={"threshold": -2.0})  # forgets in ~50 interactions
    nxt = gate(30000, v(4), PATCH_V3)
    far = retrieve(mem, nxt, 30000, "posterior", PATCH_V3)
    assert far.chunks == []  # every memory has decayed below the threshold...
    assert [h.n for h in far.lineage_history] == [5, 3, 2]  # ...the thread's verdicts are still exact matches
    off = retrieve(mem, nxt, 30000, "posterior", PATCH_V3, RetrievalOptions(lineage_history=0))
    assert off.lineage_history == []


def test_lineage_reaches_the_offline_predictor_inputs(thread_memory, settings):
    mem = thread_memory
    c = consult(mem, OfflinePredictor(settings.predictor), gate(8, v(3), PATCH_V3), 8, settings, reinforce=False)
    assert [h.n for h in c.prior_context.lineage_history] == [5, 3, 2]
    assert [h.changed_since for h in c.posterior_context.lineage_history] == [False, True, True]


def test_chunk_carries_lineage_revision_and_hash():
    rec = OutcomeRecord(
        request=gate(1, "Re: [PATCH v2 1/4] hwmon: (pmbus) X", "diff"),
        n=1,
        workflow_id="vicar-gate/g1",
        action=Action.approve,
        response_text="",
        answered_by=AnsweredBy.human,
    )
    c = outcome_chunk(rec)
    assert (c.lineage, c.revision, c.artifact_hash) == ("hwmon: (pmbus) X", "v2", artifact_hash("diff"))
    explicit = rec.model_copy(
        update={
            "request": rec.request.model_copy(
                update={"lineage": "topic/x", "revision": "r7", "artifact_paths": ["a.md"]}
            )
        }
    )
    # Paths that were not read leave the hash unknown, never the inline text's hash.
    c = outcome_chunk(explicit)
    assert (c.lineage, c.revision, c.artifact_hash) == ("topic/x", "r7", "")
    assert outcome_chunk(explicit, "diff\n--- a.md\nbody").artifact_hash == artifact_hash("diff\n--- a.md\nbody")


# -- migration --------------------------------------------------------------------------


def test_store_from_the_previous_schema_migrates(settings, embedder):
    mine = next(i for i, m in enumerate(MIGRATIONS) if "ADD COLUMN lineage" in m)
    path = settings.principals_dir / "alice" / "memory.db"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    for m in MIGRATIONS[:mine]:
        db.executescript(m)
    db.execute(f"PRAGMA user_version = {mine}")
    old = outcome_chunk(
        OutcomeRecord(
            request=gate(1, v(1), PATCH_V1),
            n=1,
            workflow_id="vicar-gate/g1",
            action=Action.correct,
            response_text="Expecting a reroll.",
            answered_by=AnsweredBy.human,
        )
    )
    row = old.model_dump()
    row["kind"], row["salient_percepts"] = old.kind.value, "[]"
    cols = [c for c in _COLUMNS if c not in LINEAGE_COLUMNS]
    db.execute(f"INSERT INTO chunks ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
    db.execute("INSERT INTO traces VALUES (?, 1)", (old.id,))
    db.commit()
    db.close()

    mem = PrincipalMemory("alice", settings.principals_dir, embedder, MemoryParams())
    try:
        assert mem.store._db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        migrated = mem.store.get_chunk(old.id)
        assert (migrated.lineage, migrated.revision, migrated.artifact_hash) == ("", "", "")
        assert migrated.human_response == "Expecting a reroll." and migrated.traces == [1]
        # The old chunk is retrieved as before but never matches a lineage, not even "".
        nxt = gate(3, v(2), PATCH_V1)
        ctx = retrieve(mem, nxt, 3, "posterior", PATCH_V1)
        assert [c.chunk_id for c in ctx.chunks] == [old.id] and ctx.lineage_history == []
        assert mem.lineage_history("gate", "", 10) == []
        answer(mem, 2, gate(2, v(1), PATCH_V1), "approve", "Fine now.")
        assert [(h.n, h.changed_since) for h in retrieve(mem, nxt, 3, "posterior", PATCH_V1).lineage_history] == [
            (2, False)
        ]
        assert any(r[1] == "chunks_lineage" for r in mem.store._db.execute("PRAGMA index_list(chunks)"))
    finally:
        mem.close()


# -- the LLM sees it ----------------------------------------------------------------------

SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-4-5"


@pytest.fixture
def anthropic_api(monkeypatch):
    s = AnthropicStandIn(lambda body: "approve" if body["model"] == HAIKU else "Applied.\nCONFIDENCE: 0.9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-standin-secret-key-0123456789")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", s.root)
    yield s
    s.close()


def test_llm_prompt_shows_the_thread_after_the_cacheable_prefix(thread_memory, settings, anthropic_api):
    mem = thread_memory
    predictor = LLMPredictor(AnthropicClient(), SONNET, HAIKU)
    c = consult(mem, predictor, gate(8, f"Re: {v(3)}", PATCH_V3), 8, settings, working_memory="Prefers regmap.")
    consult(
        mem,
        predictor,
        gate(9, "[PATCH] hwmon: (lm90) Another chip", SIMILAR),
        9,
        settings,
        working_memory="Prefers regmap.",
    )
    calls = [b for b in anthropic_api.bodies() if b["model"] == SONNET]
    assert len(calls) == 4  # two passes of two gates
    assert all(b["system"] == calls[0]["system"] for b in calls)  # the prefix, byte-identical
    prior, post = (AnthropicStandIn.user_text(b) for b in calls[:2])
    line = (
        "Your last verdict on this thread, 3 interactions ago (v3; the artifact has changed since: no): "
        "approve — 'Applied to hwmon-next.'"
    )
    assert line in post and line not in str(calls[1]["system"])
    fenced = re.search(r"<<<BEGIN LINEAGE (\w+)>>>\n(.*?)\n<<<END LINEAGE \1>>>", post, re.S)
    assert fenced and fenced.group(2).splitlines() == [
        line,
        "Your verdict before that, 5 interactions ago (v2; the artifact has changed since: yes): hold — "
        "'Let me check the datasheet.'",
        "Your verdict before that, 6 interactions ago (v2; the artifact has changed since: yes): correct — "
        "'Expecting a reroll.'",
    ]
    assert "the artifact has changed since: unknown): approve" in prior  # the prior has not read it
    assert post.index("<<<BEGIN LINEAGE") < post.index("<<<BEGIN ARTIFACT")
    # The verdicts shown count as used; the other thread's gate shows none.
    assert set(c.posterior.used_chunk_ids) >= {h.chunk_id for h in c.posterior_context.lineage_history}
    other = AnthropicStandIn.user_text(calls[3])
    assert "LINEAGE" not in other


# -- the replay -------------------------------------------------------------------------


def test_replay_carries_junios_topic_history(embedder, tmp_path, monkeypatch):
    if DATA is None:
        pytest.fail("the gate-replay dataset is not beside the checkout; set VICAR_GATE_REPLAY_DIR")
    events = load_events([DATA / "git-whats-cooking.jsonl.gz"])["Junio C Hamano"][:150]
    seen = []

    def spy(memory, predictor, request, n, settings, **kw):
        c = real(memory, predictor, request, n, settings, **kw)
        seen.append((n, c.prior_context.lineage_history, c.posterior_context.lineage_history))
        return c

    real = replay.consult
    monkeypatch.setattr(replay, "consult", spy)
    preds = replay.replay_reviewer(events, replay.Variant(name="composite"), embedder, Settings(data_dir=tmp_path))
    assert len(preds) == len(seen) == len(events)
    repeated = unchanged = 0
    for (n, prior, post), event in zip(seen, events):
        before = [(i + 1, e) for i, e in enumerate(events[: n - 1]) if e.artifact_title == event.artifact_title]
        expected = [
            (m, e.action.value, artifact_hash(e.artifact_text) != artifact_hash(event.artifact_text))
            for m, e in reversed(before[-3:])
        ]
        assert [(h.n, h.action, h.changed_since) for h in post] == expected, event.artifact_title
        assert [(h.n, h.changed_since) for h in prior] == [(m, None) for m, _, _ in expected]
        assert all(h.ago == n - h.n for h in post)
        repeated += bool(expected)
        unchanged += bool(expected) and not expected[0][2]
    assert repeated > 30 and 0 < unchanged < repeated  # both cases were exercised
