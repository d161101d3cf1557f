"""The pre-review, so the proxy raises what this person would, not canned words: before
a gate is answered, the concerns and
questions this person raised on the artifact's lineage and on the most similar past
work, as their own sentences, each with its source, ranked for this artifact.

Pure: it reads only the RetrievalContext the consult path already built (the lineage's
verdicts and the retrieved chunks, a dozen replies at most), the request and the
artifact, so it is cheap enough for every gate. Nothing is paraphrased: an item's text is
one sentence of a past reply, cleaned of tags and status lines (vicar.proxy.concerns) and
of quoted code.

The score of a sentence is a weighted sum of features (WEIGHTS), times the weight of the
answer it came with (a correction's words count more than an approval's):
- often: how often this person raises what the sentence is about in this context: the
  best share, over its concern categories and content words, of the *other* retrieved
  corrections that raise it too;
- recent: 1 / (1 + ago / RECENCY_SCALE), ago in interactions (ctx.n - n);
- similar: the retrieval similarity of its source (a lineage verdict counts as 1);
- lineage: it was said on this artifact's own lineage;
- touches: the artifact names what it is about (an identifier, file or function the
  sentence names, or enough of its words), or it asks for a test the artifact lacks;
- question: it asks something.
The weights are fixed and set by hand before any replay; see docs/prereview.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from vicar.memory.chunk import FACT_KINDS
from vicar.models import AnsweredBy, GateRequest, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy.concerns import categories_in, content_words, strip_tags

DEFAULT_K = 4
DEFAULT_BUDGET = 1200  # characters over all items' texts
MIN_WORDS = 3  # "Unnecessary comment." is two: too little to stand alone
MAX_SENTENCE_CHARS = 400  # longer "sentences" are unsplit paragraphs or pasted logs
RECENCY_SCALE = 500.0  # interactions at which the recency feature halves
ARTIFACT_CHARS = 20_000  # of the artifact searched for what a sentence names: keeps a huge diff cheap
PARSED_CACHE = 20_000  # reply texts whose sentences are kept worked out (_parsed)
DUPLICATE = 0.6  # token Jaccard at or above which two sentences are one concern
TURNED_BACK = ("correct", "reject")
ACTION_WEIGHT = {"correct": 1.0, "reject": 1.0}
OTHER_ACTION_WEIGHT = 0.5  # an approval's or a hold's words: a remark, seldom a blocker
# Words said on another kind of work (another task type): "Fine for a patch bump" is
# weak evidence on a docs gate, so the same kind's words come first; kept, and marked.
OTHER_WORK_WEIGHT = 0.5
LEARN_RATE = 0.05  # RankLearner's step: a few dozen corrections move a weight by about one
WEIGHTS = {"often": 1.0, "recent": 0.5, "similar": 1.0, "lineage": 1.0, "touches": 1.0, "question": 0.25}

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_TOKEN = re.compile(r"\w+")
# Quoted code: indented lines, diff lines, lines that end like C. Prose naming data->x stays.
_CODE_LINE = re.compile(
    r"^(?:\t| {2,}|[+-](?:\t|[^\s+-])|@@|#\s*(?:include|define|if)|diff --git|---|\+\+\+)|[;{}]\s*$"
)
# Identifiers worth matching exactly: snake_case, calls, paths and files, CamelCase.
_IDENT = re.compile(
    r"[A-Za-z_][\w]*_[\w]+|\w+\(\)|[\w./-]+\.(?:c|h|py|rs|go|js|ts|md|txt|yaml|yml|json|sh|dts|dtsi)\b|[a-z]+[A-Z]\w+"
)
_TEST_IN_ARTIFACT = re.compile(r"(?:^|/)(?:tests?|selftests?|t)/|test_\w+|_test\.|\.t\b|\bt\d{4}-", re.I | re.M)


@dataclass
class _Source:
    chunk_id: str
    text: str
    action: str
    n: int
    similarity: float | None
    lineage: bool
    gate_id: str = ""
    task_type: str = ""  # "": this gate's own work (a lineage verdict not retrieved)
    keys: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Sentence:
    """One sentence of a reply with what the ranking reads of it: all of it depends on the
    text alone, so it is worked out once per reply text (_parsed), not once per gate."""

    text: str
    tokens: frozenset[str]
    categories: frozenset[str]
    words: frozenset[str]
    idents: frozenset[str]


@dataclass
class _Candidate:
    sentence: _Sentence
    source: _Source
    merged: int = 1


def sentences(text: str, least: int = MIN_WORDS) -> list[str]:
    """The reply's sentences, already stripped of tags and status lines, without quoted
    code; lines wrapped inside a paragraph are joined first (mail wraps at 72 columns)."""
    kept = "\n".join("" if _CODE_LINE.search(line) else line for line in text.splitlines())
    out = []
    for para in _PARAGRAPH.split(kept):
        for s in _SENTENCE_END.split(" ".join(para.split())):
            if least <= len(_TOKEN.findall(s)) and len(s) <= MAX_SENTENCE_CHARS:
                out.append(s)
    return out


def _sources(ctx: RetrievalContext) -> list[_Source]:
    """The person's own answers in the context: the lineage's verdicts first (with the
    retrieved chunk's whole text when the same gate was also retrieved), then the
    retrieved episodes, then their answers on the most similar past work (any state or
    task type); facts are derived, not said, and left out."""
    by_id = {c.chunk_id: c for c in ctx.chunks}
    out: dict[str, _Source] = {}
    for v in ctx.lineage_history:
        full = by_id.get(v.chunk_id)
        text = full.human_response if full is not None and full.human_response else v.response
        out[v.chunk_id] = _Source(
            v.chunk_id, text, v.action, v.n, 1.0, True, v.gate_id or (full.gate_id if full else ""), ""
        )
    for c in (*ctx.chunks, *ctx.similar_work):
        if c.kind in FACT_KINDS or c.answered_by is not AnsweredBy.human or c.chunk_id in out:
            continue
        out[c.chunk_id] = _Source(
            c.chunk_id, c.human_response, c.outcome, c.created_n, c.similarity, False, c.gate_id, c.task_type
        )
    return [s for s in out.values() if s.text.strip()]


def _artifact_terms(request: GateRequest, artifact: str) -> tuple[str, set[str], set[str]]:
    """The artifact's text, its identifiers (lower-cased) and its content words."""
    body = (artifact or request.artifact_text)[:ARTIFACT_CHARS]
    text = "\n".join(x for x in (request.title, body, *request.artifact_paths) if x)
    idents = {m.lower().rstrip("()") for m in _IDENT.findall(text)}
    return text, idents, content_words(text)


def _touches(c: _Sentence, idents: set[str], words: set[str], has_test: bool) -> tuple[float, list[str]]:
    named = sorted(c.idents & idents)
    if named:
        return 1.0, named
    if "testing" in c.categories and not has_test:
        return 0.75, ["no test in the artifact"]
    shared = sorted(c.words & words)
    if c.words:
        return 0.5 * len(shared) / len(c.words), shared[:5]
    return 0.0, []


def _other_work(src: _Source, request: GateRequest) -> bool:
    """Said on another task type than the gate's (the artifact's own lineage is this
    work whatever its chunk says)."""
    return not src.lineage and bool(src.task_type) and src.task_type != request.task_type


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _prefix(tokens: frozenset[str], rarity: Mapping[str, int]) -> list[str]:
    """The tokens a sentence at Jaccard >= DUPLICATE with this one must share one of
    (prefix filtering): two such sets share at least ceil(DUPLICATE * |a|) tokens, so a
    set's first |a| - ceil(DUPLICATE * |a|) + 1 tokens in any order fixed for the call meet
    the other's. Rarest first, so few sentences share a prefix token by chance."""
    ordered = sorted(tokens, key=lambda t: (rarity[t], t))
    least = math.ceil(DUPLICATE * len(ordered) - 1e-9)  # rounding down only lengthens the prefix
    return ordered[: len(ordered) - least + 1]


@functools.lru_cache(maxsize=PARSED_CACHE)
def _parsed(text: str) -> tuple[frozenset[str], tuple[_Sentence, ...]]:
    """A reply's keys (categories and content words, for `often`) and its sentences.
    A past answer never changes once recorded, so the same text comes back gate after
    gate; bounded, so a long history costs memory only up to PARSED_CACHE replies."""
    clean = strip_tags(text)
    out = []
    for s in sentences(clean):
        toks = frozenset(t.lower() for t in _TOKEN.findall(s))
        idents = frozenset(m.lower().rstrip("()") for m in _IDENT.findall(s))
        out.append(_Sentence(s, toks, frozenset(categories_in(s)), frozenset(content_words(s)), idents))
    return frozenset(categories_in(clean) | content_words(clean)), tuple(out)


def _candidates(sources: Sequence[_Source]) -> list[_Candidate]:
    said: list[tuple[_Source, _Sentence]] = []
    for src in sources:
        src.keys, parsed = _parsed(src.text)
        said.extend((src, sent) for sent in parsed)
    rarity = Counter(t for _, sent in said for t in sent.tokens)
    out: list[_Candidate] = []
    # Token -> positions in `out` of the kept sentences whose prefix holds it: the first
    # duplicate is the lowest such position that passes, as a scan of `out` would find.
    index: dict[str, list[int]] = {}
    for src, sent in said:
        prefix = _prefix(sent.tokens, rarity)
        near = sorted({i for t in prefix for i in index.get(t, ())})
        # The same words about another function are another concern.
        same = next(
            (
                out[i]
                for i in near
                if out[i].sentence.idents == sent.idents and _jaccard(out[i].sentence.tokens, sent.tokens) >= DUPLICATE
            ),
            None,
        )
        if same is None:
            for t in prefix:
                index.setdefault(t, []).append(len(out))
            out.append(_Candidate(sent, src))
        elif same.source is not src:
            same.merged += 1  # the person said it again: kept once, counted
    return out


@dataclass(frozen=True)
class _Featured:
    """A candidate with everything its score needs but the weights."""

    candidate: _Candidate
    features: dict[str, float]
    weight: float
    other: bool
    touches: list[str]  # what of it the artifact names


def _featured(ctx: RetrievalContext, request: GateRequest, artifact: str) -> list[_Featured]:
    # The same kind of work first, so a sentence said on both is kept as said on this one.
    sources = sorted(_sources(ctx), key=lambda s: _other_work(s, request))
    cands = _candidates(sources) if sources else []
    if not cands:
        return []
    turned_back = [s for s in sources if s.action in TURNED_BACK]
    _, idents, words = _artifact_terms(request, artifact)
    has_test = bool(_TEST_IN_ARTIFACT.search((artifact or request.artifact_text)[:ARTIFACT_CHARS]))
    # How many turned-back answers raise each key: `often` counts the others' for a
    # candidate by taking its own source back out, linear in the candidates.
    raised = Counter(key for s in turned_back for key in s.keys)
    turned_back_ids = {id(s) for s in turned_back}
    out: list[_Featured] = []
    for c in cands:
        sent, src = c.sentence, c.source
        own = id(src) in turned_back_ids
        others = len(turned_back) - own
        keys = sent.categories | sent.words
        often = (
            max(((raised[key] - (own and key in src.keys)) / others for key in keys), default=0.0) if others else 0.0
        )
        touch, named = _touches(sent, idents, words, has_test)
        features = {
            "often": often,
            "recent": 1.0 / (1.0 + max(ctx.n - src.n, 0) / RECENCY_SCALE),
            "similar": max(src.similarity or 0.0, 0.0) if not src.lineage else 1.0,
            "lineage": 1.0 if src.lineage else 0.0,
            "touches": touch,
            "question": 1.0 if sent.text.rstrip().endswith("?") else 0.0,
        }
        other = _other_work(src, request)
        weight = ACTION_WEIGHT.get(src.action, OTHER_ACTION_WEIGHT) * (OTHER_WORK_WEIGHT if other else 1.0)
        out.append(_Featured(c, features, weight, other, named))
    return out


# The last gate's candidates: the consult's words, the replay's report and the learned
# ranking all rank the same context for the same gate, so the work is done once. Kept
# by identity (a context is built per consult and not changed after), one entry only.
_last: tuple[RetrievalContext, GateRequest, str, list[_Featured]] | None = None


def _featured_once(ctx: RetrievalContext, request: GateRequest, artifact: str) -> list[_Featured]:
    global _last
    last = _last
    if last is not None and last[0] is ctx and last[1] is request and last[2] == artifact:
        return last[3]
    featured = _featured(ctx, request, artifact)
    _last = (ctx, request, artifact, featured)
    return featured


def rank(
    ctx: RetrievalContext, request: GateRequest, artifact: str, weights: Mapping[str, float] | None = None
) -> list[PreReviewItem]:
    """Every candidate sentence, scored (`weights`: a RankLearner's, else WEIGHTS), best first."""
    w = WEIGHTS if weights is None else weights
    scored: list[PreReviewItem] = []
    for f in _featured_once(ctx, request, artifact):
        c = f.candidate
        src = c.source
        scored.append(
            PreReviewItem(
                text=c.sentence.text,
                score=f.weight * sum(w.get(k, 0.0) * x for k, x in f.features.items()),
                chunk_id=src.chunk_id,
                gate_id=src.gate_id,
                n=src.n,
                action=src.action,
                lineage=src.lineage,
                similarity=src.similarity,
                concerns=sorted(c.sentence.categories),
                touches=list(f.touches),
                merged=c.merged,
                features=dict(f.features),
                task_type=src.task_type or request.task_type,
                other_work=f.other,
            )
        )
    scored.sort(key=lambda it: (-it.score, -it.n, it.text))
    return scored


def select(scored: Sequence[PreReviewItem], k: int = DEFAULT_K, budget: int = DEFAULT_BUDGET) -> list[PreReviewItem]:
    """The best `k` whose texts total at most `budget` characters."""
    out: list[PreReviewItem] = []
    used = 0
    for item in scored:
        if len(out) >= k:
            break
        if used + len(item.text) > budget:
            continue  # a shorter one further down may still fit
        out.append(item)
        used += len(item.text)
    return out


def pre_review(
    ctx: RetrievalContext,
    request: GateRequest,
    artifact: str,
    k: int = DEFAULT_K,
    budget: int = DEFAULT_BUDGET,
    weights: Mapping[str, float] | None = None,
) -> list[PreReviewItem]:
    """At most `k` of the person's own sentences, best first, whose texts total at most
    `budget` characters; empty when the memory holds none of their words."""
    return select(rank(ctx, request, artifact, weights), k, budget) if k > 0 else []


class RankLearner(BaseModel):
    """The ranking learned online from one person's answers: logistic weights over the
    features, starting at WEIGHTS. When the human turns a gate back, every candidate
    the gate ranked is a positive if the human's words raise one of its categories or
    share two of its content words, else a negative; one gradient step each. Pure and
    serializable, so a gate's memory (or the replay) can hold one per principal."""

    weights: dict[str, float] = Field(default_factory=lambda: dict(WEIGHTS))
    bias: float = 0.0
    rate: float = LEARN_RATE
    updates: int = 0

    def update(self, scored: Sequence[PreReviewItem], human_text: str, names: Sequence[str] = ()) -> None:
        clean = strip_tags(human_text, names)
        cats, words = categories_in(clean), content_words(clean)
        for it in scored:
            y = 1.0 if set(it.concerns) & cats or len(words & content_words(it.text)) >= 2 else 0.0
            z = self.bias + sum(self.weights.get(f, 0.0) * x for f, x in it.features.items())
            g = self.rate * (y - 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0))))
            self.bias += g
            for f, x in it.features.items():
                self.weights[f] = self.weights.get(f, 0.0) + g * x
        self.updates += 1


def render(items: Sequence[PreReviewItem]) -> str:
    """The items as one text, one paragraph each (the replay scores this)."""
    return "\n\n".join(it.text for it in items)
