"""The replay's words metric: does the proxy raise the concerns this person would raise?
(Above the threshold its words are the answer the agent receives, so they are scored
too.) Scored on correct/reject events only (an approval has nothing to raise),
with tags and status lines stripped and the design's categories on word boundaries
(vicar.proxy.concerns), plus each reviewer's own themes learned online from their past
corrections only. Beside it, the same scores for baselines built online from the
reviewer's earlier events, so a figure always has its floor in the same run.

- concern recall / precision / F1: per reviewer (micro over their events), pooled over
  every event, and the mean over reviewers; concerns raised per event, proxy and human.
- sentence recall@5 / precision@5: a human sentence of >= SENTENCE_WORDS words is raised
  when one of the first K predicted sentences matches it at cosine >= MATCH_THRESHOLD
  (all-MiniLM-L6-v2; the threshold is checked against bench/words-judged.jsonl);
  precision: of those predicted sentences, the share matching a human sentence.
- text sim: a diagnostic, the mean cosine of the raw texts, an empty prediction scored 0.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from vicar.eval.dataset import GateEvent
from vicar.memory.chunk import ARTIFACT_EMBED_CHARS
from vicar.memory.embedder import Embedder
from vicar.proxy.concerns import categories_in, content_words, strip_tags

SCORED = ("correct", "reject")
THEME_MIN = 5  # a word said in at least this many past corrections...
THEME_RATIO = 2.0  # ...and at least this many times as often (per reply) as in approvals...
THEME_TOP = 20  # ...the most frequent such words (every word of a long correction is not a theme)
_THEME_POOL = 400  # the most frequent correction words searched for them
SENTENCE_WORDS = 4
TOP_K = 5
MATCH_THRESHOLD = 0.6
SIMILAR_K = 5

# Baselines, online: each event sees only the same reviewer's earlier events.
FREQUENT = "most frequent reply"
FOR_ACTION = "most frequent reply for the predicted action"
FOR_TRUE_ACTION = "most frequent reply for the true action (told the label)"
SIMILAR = "reply to the most similar past artifact"
SIMILAR_JOINED = "five most similar past replies joined"
BASELINES = (FREQUENT, FOR_TRUE_ACTION, SIMILAR, SIMILAR_JOINED)
# A proxy variant's pre-review (vicar.proxy.prereview), scored like its words.
PREREVIEW = "pre-review"
PREREVIEW_LEARNED = "pre-review, ranking learned online"

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_TOKEN = re.compile(r"\w+")


class WordScores(BaseModel):
    events: int = 0  # correct/reject events scored
    recall: float | None = None
    precision: float | None = None
    f1: float | None = None
    raised: float = 0.0  # concerns in the prediction per event
    human_raised: float = 0.0  # concerns in the human's reply per event
    sentence_recall: float | None = None
    sentence_precision: float | None = None
    text_sim: float | None = None  # diagnostic


class Words(BaseModel):
    """One predictor's words scores: per reviewer, pooled, and the mean over reviewers."""

    per_reviewer: dict[str, WordScores]
    pooled: WordScores
    mean: WordScores


class Themes:
    """A reviewer's concern themes, learned from the replies seen so far: the THEME_TOP
    content words said in the most past corrections (at least THEME_MIN) that are
    THEME_RATIO times as frequent in them as in past approvals. Fed after each event is
    scored, so never from the future."""

    def __init__(self) -> None:
        self.turned_back: Counter[str] = Counter()
        self.approved: Counter[str] = Counter()
        self.n_turned_back = self.n_approved = 0

    def add(self, action: str, clean_text: str) -> None:
        words = content_words(clean_text)
        if action in SCORED:
            self.turned_back.update(sorted(words))  # sorted: ties in most_common() break the same way in every process
            self.n_turned_back += 1
        elif action == "approve":
            self.approved.update(sorted(words))
            self.n_approved += 1

    def is_theme(self, word: str) -> bool:
        c = self.turned_back[word]
        if c < THEME_MIN:
            return False
        approval_rate = self.approved[word] / self.n_approved if self.n_approved else 0.0
        return c / self.n_turned_back >= THEME_RATIO * approval_rate

    def current(self) -> frozenset[str]:
        found = (w for w, _ in self.turned_back.most_common(_THEME_POOL) if self.is_theme(w))
        return frozenset(w for _, w in zip(range(THEME_TOP), found))

    def concerns(self, clean_text: str, themes: frozenset[str] | None = None) -> set[str]:
        themes = self.current() if themes is None else themes
        return categories_in(clean_text) | {f"theme:{w}" for w in content_words(clean_text) & themes}


def sentences(clean_text: str, least: int = SENTENCE_WORDS) -> list[str]:
    """The (stripped) text's sentences of at least `least` words, in order; lines wrapped
    inside a paragraph are joined first (mail wraps at 72 columns)."""
    out = []
    for para in _PARAGRAPH.split(clean_text):
        for s in _SENTENCE_END.split(" ".join(para.split())):
            if len(_TOKEN.findall(s)) >= least:
                out.append(s)
    return out


def _artifact_text(e: GateEvent) -> str:
    # The text the replay's consult path already embedded (the warm cache holds it).
    return e.artifact_text[:ARTIFACT_EMBED_CHARS] or e.artifact_title or e.question


def baselines(
    events: Sequence[GateEvent], embedder: Embedder, predicted: Sequence[str | None] = ()
) -> dict[str, list[str]]:
    """The baselines' texts for one reviewer's events (in order), each built online from
    the earlier events only; `predicted`: a variant's predicted actions, for FOR_ACTION
    (empty: not built)."""
    out: dict[str, list[str]] = {name: [] for name in (*BASELINES, *([FOR_ACTION] if predicted else []))}
    replies: Counter[str] = Counter()
    by_action: dict[str, Counter[str]] = {}
    vectors = embedder.embed([_artifact_text(e) for e in events]) if events else np.zeros((0, 1))
    past: list[int] = []  # earlier events with a reply
    # Their vectors, kept in order as they come: the search reads a prefix, where
    # gathering vectors[past] copied the whole past for every event.
    past_vectors = np.empty_like(vectors)
    for i, e in enumerate(events):
        out[FREQUENT].append(replies.most_common(1)[0][0] if replies else "")
        true = by_action.get(e.action.value)
        out[FOR_TRUE_ACTION].append(true.most_common(1)[0][0] if true else "")
        if predicted:
            mine = by_action.get(predicted[i] or "")
            out[FOR_ACTION].append(mine.most_common(1)[0][0] if mine else "")
        if past and e.action.value in SCORED:
            order = _most_similar(past_vectors[: len(past)] @ vectors[i], SIMILAR_K)
            out[SIMILAR].append(events[past[order[0]]].response)
            out[SIMILAR_JOINED].append("\n\n".join(events[past[j]].response for j in order))
        else:  # only correct/reject events are scored: spare the search
            out[SIMILAR].append("")
            out[SIMILAR_JOINED].append("")
        if e.response.strip():
            replies[e.response] += 1
            by_action.setdefault(e.action.value, Counter())[e.response] += 1
            past_vectors[len(past)] = vectors[i]
            past.append(i)
    return out


def _most_similar(sims: np.ndarray, k: int) -> np.ndarray:
    """The first k of a stable descending sort of `sims` (ties: the earlier first),
    sorting only the values at or above the k-th: a full sort per event made the
    baselines quadratic in log time too."""
    if len(sims) <= k:
        return np.argsort(-sims, kind="stable")
    neg = -sims
    kth = np.partition(neg, k - 1)[k - 1]
    near = np.flatnonzero(neg <= kth)
    return near[np.argsort(neg[near], kind="stable")][:k]


def for_action(events: Sequence[GateEvent], predicted: Sequence[str | None]) -> list[str]:
    """FOR_ACTION alone, as baselines builds it: a variant's baseline needs neither the
    embeddings nor the similar-artifact search the variant-free ones do."""
    out: list[str] = []
    by_action: dict[str, Counter[str]] = {}
    for i, e in enumerate(events):
        mine = by_action.get(predicted[i] or "")
        out.append(mine.most_common(1)[0][0] if mine else "")
        if e.response.strip():
            by_action.setdefault(e.action.value, Counter())[e.response] += 1
    return out


class _Tally:
    def __init__(self) -> None:
        self.events = self.hit = self.said = self.raised = 0
        self.s_hit = self.s_human = self.p_hit = self.p_said = 0
        self.sims: list[float] = []

    def scores(self) -> WordScores:
        r = self.hit / self.said if self.said else None
        p = self.hit / self.raised if self.raised else None
        f1 = 2 * r * p / (r + p) if r is not None and p is not None and r + p else (0.0 if self.said else None)
        return WordScores(
            events=self.events,
            recall=r,
            precision=p,
            f1=f1,
            raised=self.raised / self.events if self.events else 0.0,
            human_raised=self.said / self.events if self.events else 0.0,
            sentence_recall=self.s_hit / self.s_human if self.s_human else None,
            sentence_precision=self.p_hit / self.p_said if self.p_said else None,
            text_sim=float(np.mean(self.sims)) if self.sims else None,
        )

    def merge(self, other: _Tally) -> None:
        for k in ("events", "hit", "said", "raised", "s_hit", "s_human", "p_hit", "p_said"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.sims += other.sims


def _embed(embedder: Embedder, texts: list[str]) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(t for t in texts if t.strip()))
    return dict(zip(unique, embedder.embed(unique))) if unique else {}


class _Prepared:
    """A reviewer's events and predicted words, cleaned and split into sentences, with the
    texts the scores need embedded."""

    def __init__(self, reviewer: str, events: Sequence[GateEvent], texts: Mapping[str, Sequence[str]]) -> None:
        names = (reviewer,)
        self.events, self.texts = events, texts
        self.scored = [i for i, e in enumerate(events) if e.action.value in SCORED]
        self.clean = {i: strip_tags(events[i].response, names) for i in range(len(events))}
        self.pred_clean = {(label, i): strip_tags(t[i], names) for label, t in texts.items() for i in self.scored}
        self.human_s = {i: sentences(self.clean[i]) for i in self.scored}
        self.pred_s = {k: sentences(v)[:TOP_K] for k, v in self.pred_clean.items()}

    def needed(self) -> list[str]:
        return (
            [s for v in self.human_s.values() for s in v]
            + [s for v in self.pred_s.values() for s in v]
            + [self.events[i].response for i in self.scored]
            + [t[i] for t in self.texts.values() for i in self.scored]
        )


def words_texts(
    events: Mapping[str, Sequence[GateEvent]], texts: Mapping[str, Mapping[str, Sequence[str]]] | None = None
) -> list[str]:
    """Every text score_words embeds, once each: with `texts` None, only those the dataset
    alone decides (the human replies and their sentences), to embed with the dataset."""
    out: list[str] = []
    for reviewer, evs in events.items():
        mine = {label: t[reviewer] for label, t in (texts or {}).items() if reviewer in t}
        out.extend(_Prepared(reviewer, evs, mine).needed())
    return list(dict.fromkeys(t for t in out if t.strip()))


def _score_reviewer(
    prep: _Prepared,
    embedder: Embedder,
    threshold: float,
    vectors: Mapping[str, np.ndarray] | None = None,
) -> dict[str, _Tally]:
    events, texts = prep.events, prep.texts
    clean, pred_clean, human_s, pred_s = prep.clean, prep.pred_clean, prep.human_s, prep.pred_s
    vec = vectors if vectors is not None else _embed(embedder, prep.needed())
    tallies = {label: _Tally() for label in texts}
    themes = Themes()
    for i, e in enumerate(events):
        if e.action.value in SCORED:
            now = themes.current()
            human = themes.concerns(clean[i], now)
            hs = np.array([vec[s] for s in human_s[i]])
            for label, t in texts.items():
                tally = tallies[label]
                said = themes.concerns(pred_clean[(label, i)], now)
                tally.events += 1
                tally.hit += len(human & said)
                tally.said += len(human)
                tally.raised += len(said)
                ps = pred_s[(label, i)]
                tally.s_human += len(hs)
                tally.p_said += len(ps)
                if len(hs) and ps:
                    sims = np.array([vec[s] for s in ps]) @ hs.T  # predicted x human
                    tally.s_hit += int(np.sum(sims.max(axis=0) >= threshold))
                    tally.p_hit += int(np.sum(sims.max(axis=1) >= threshold))
                if e.response.strip():
                    pred = t[i]
                    tally.sims.append(float(vec[pred] @ vec[e.response]) if pred.strip() else 0.0)
        themes.add(e.action.value, clean[i])
    return tallies


def score_words(
    events: Mapping[str, Sequence[GateEvent]],
    texts: Mapping[str, Mapping[str, Sequence[str]]],
    embedder: Embedder,
    threshold: float = MATCH_THRESHOLD,
    vectors: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Words]:
    """`texts[label][reviewer]`: each predictor's words for the reviewer's events, in
    order. One pass per reviewer scores every predictor against the same online themes.
    `vectors`: every text of words_texts(events, texts) already embedded (the caller
    embeds them in batches and shows progress), else embedded here."""
    per: dict[str, dict[str, _Tally]] = {label: {} for label in texts}
    for reviewer, evs in events.items():
        mine = {label: t[reviewer] for label, t in texts.items() if reviewer in t}
        for label, tally in _score_reviewer(_Prepared(reviewer, evs, mine), embedder, threshold, vectors).items():
            per[label][reviewer] = tally
    out = {}
    for label, tallies in per.items():
        pooled = _Tally()
        for t in tallies.values():
            pooled.merge(t)
        scores = {r: t.scores() for r, t in tallies.items()}
        out[label] = Words(per_reviewer=scores, pooled=pooled.scores(), mean=_mean(list(scores.values())))
    return out


def _mean(scores: list[WordScores]) -> WordScores:
    """The mean over reviewers with scored events: each person counts once."""
    kept = [s for s in scores if s.events]

    def avg(field: str) -> float | None:
        xs = [getattr(s, field) for s in kept if getattr(s, field) is not None]
        return float(np.mean(xs)) if xs else None

    return WordScores(
        events=sum(s.events for s in kept),
        recall=avg("recall"),
        precision=avg("precision"),
        f1=avg("f1"),
        raised=avg("raised") or 0.0,
        human_raised=avg("human_raised") or 0.0,
        sentence_recall=avg("sentence_recall"),
        sentence_precision=avg("sentence_precision"),
        text_sim=avg("text_sim"),
    )
