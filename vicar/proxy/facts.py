"""The human's semantic facts (docs/design/memory-types.md): preferences and procedures.

Preferences: what this human wants in a context, in their own words, with a confidence
that answers move asymmetrically (Hindsight) and a lifecycle.

- Extraction, at consolidation (the replay: every few dozen gates): in each context
  the session touched, a concern word the human said in at least `preference_min` of
  their latest corrections and rejections, and more often there than when approving,
  becomes a preference: the latest sentence of theirs that says it. An existing live
  one on the same subject stands; one that lost its confidence (below the start) is
  superseded by the new words, linked to them.
- Every later human answer in the context moves it: a correction or rejection that
  says the subject again confirms it, c += alpha (1 - c); an approval of an artifact
  that does not mention it disconfirms it, c -= factor alpha c, factor >= 1 (a
  disconfirming answer moves it more). learned -> confirmed at `confirm_at`;
  deactivated below `deactivate_at`.
- A live preference is a chunk of kind `preference`, retrieved beside the episodes in
  the same search; one that is not live is out of retrieval, and the audit log keeps
  its record.

Procedures: the checks this human runs in a context, as the questions they keep asking.
A concern word in at least `procedure_min` of the context's latest questions (sentences
of the human's ending in "?") makes the latest such question a procedure; each later
answer that asks it again counts as an activation and a trace. A procedure is a chunk
of kind `procedure`, retrieved and loaded into the working memory like the others.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol

from vicar.memory.chunk import ChunkKind, MemoryChunk
from vicar.memory.consolidation_plan import ConsolidationPlan
from vicar.memory.fact import Fact
from vicar.memory.lexical import tokenize
from vicar.memory.principal import PrincipalMemory
from vicar.memory.text import clip
from vicar.models import Action, AnsweredBy, OutcomeRecord
from vicar.settings import FactParams

MIN_WORD = 4  # shorter tokens are rarely a concern ("ok", "fix", "v2")
FACT_CHARS = 240
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def concern_words(text: str) -> set[str]:
    return {w for w in tokenize([text])[0] if len(w) >= MIN_WORD and not w.isdigit()}


# Answers whose words are kept worked out: an answer's text never changes, and each
# session's extraction reads the context's latest `lookback` answers again.
WORDS_CACHE = 20_000


@functools.lru_cache(maxsize=WORDS_CACHE)
def _said(text: str) -> frozenset[str]:
    return frozenset(concern_words(text))


@functools.lru_cache(maxsize=WORDS_CACHE)
def _asked(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The answer's questions, each with its concern words."""
    return tuple((q, frozenset(concern_words(q))) for q in questions(text))


class Answer(Protocol):
    """A human answer as extraction reads it (RecordStore.Reply, or a whole chunk)."""

    @property
    def id(self) -> str: ...

    @property
    def outcome(self) -> str: ...

    @property
    def human_response(self) -> str: ...


def sentence_with(text: str, word: str) -> str:
    """The human's sentence that says the word (their words, clipped)."""
    for sentence in _SENTENCE.split(text):
        if word in concern_words(sentence):
            return clip(" ".join(sentence.split()), FACT_CHARS)
    return clip(" ".join(text.split()), FACT_CHARS)


def fact_id(principal: str, kind: str, state: str, task_type: str, subject: str, generation: int) -> str:
    """Fixed by the fact's place in its subject's line (0, then each successor), not by
    when it was learned: a retried extraction writes the same fact, whatever N is by then."""
    key = "\x00".join((principal, kind, state, task_type, subject, str(generation)))
    return "f-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def _fact_chunk(memory: PrincipalMemory, f: Fact) -> MemoryChunk:
    # The words are its artifact and response: the query's artifact finds the facts
    # that speak to it; the situation puts it in its context.
    return MemoryChunk(
        id=f.id,
        principal=memory.principal,
        kind=ChunkKind(f.kind),
        state=f.state,
        task_type=f.task_type,
        outcome="",
        answered_by=AnsweredBy.human.value,
        question=f.subject,
        artifact_excerpt=f.text,
        human_response=f.text,
        created_n=f.created_n,
        traces=[f.created_n],
    )


# An LLM's extraction: (state, task type, (action, words) newest first) -> (subject, preference).
Extractor = Callable[[str, str, Sequence[tuple[str, str]]], list[tuple[str, str]]]


def candidates(answers: Sequence[Answer], params: FactParams) -> list[tuple[str, str, list[str]]]:
    """Offline: (subject, the human's sentence, provenance) for each concern word said in
    at least `preference_min` corrections and rejections, and said more when turning work
    back than when approving (smoothed): a concern, not the reviewer's usual vocabulary."""
    reversal = {Action.correct.value, Action.reject.value}
    turned_back = [(c, _said(c.human_response)) for c in answers if c.outcome in reversal]
    approved = [_said(c.human_response) for c in answers if c.outcome == Action.approve.value]
    said = Counter(w for _, words in turned_back for w in words)
    said_approving = Counter(w for words in approved for w in words)
    out = []
    for word, k in sorted(said.items(), key=lambda kv: (-kv[1], kv[0])):
        if k < params.preference_min:
            break  # the counts fall from here
        if (k + 1) / (len(turned_back) + 2) <= (said_approving[word] + 1) / (len(approved) + 2):
            continue
        sources = [c for c, words in turned_back if word in words]  # newest first
        out.append((word, sentence_with(sources[0].human_response, word), [c.id for c in sources[:10]]))
    return out


def llm_candidates(
    answers: Sequence[Answer], state: str, task_type: str, extractor: Extractor
) -> list[tuple[str, str, list[str]]]:
    """The LLM's reading of the same answers; provenance: the answers that say the subject."""
    out = []
    for subject, text in extractor(state, task_type, [(c.outcome, c.human_response) for c in answers]):
        sources = [c.id for c in answers if subject in _said(c.human_response)]
        out.append((subject, clip(" ".join(text.split()), FACT_CHARS), sources[:10]))
    return out


def extract(
    memory: PrincipalMemory,
    contexts: Iterable[tuple[str, str]],
    n: int,
    params: FactParams,
    extractor: Extractor | None = None,
) -> list[Fact]:
    """New preferences of these (state, task type) contexts at interaction N, from the
    LLM when `extractor` is given, else from the concern words; returns them.
    Idempotent: a retry finds them live and adds nothing."""
    if not params.preferences:
        return []
    out: list[Fact] = []
    for state, task_type in sorted(set(contexts)):
        existing = memory.store.facts("preference", state, task_type)
        if any(f.created_n == n for f in existing):
            continue  # extracted at this N already: a retry (an LLM may not answer the same twice)
        answers = memory.store.recent_human_replies("gate", state, task_type, params.lookback)
        found = (
            llm_candidates(answers, state, task_type, extractor)
            if extractor and answers
            else candidates(answers, params)
        )
        live = {f.subject: f for f in existing if f.live}
        room = params.per_context - len(live)
        new, changed, audit = [], [], []
        for word, text, provenance in found:
            if room <= 0 and word not in live:
                continue
            old = live.get(word)
            if old is not None and (old.confidence >= params.initial_confidence or old.text == text):
                continue  # known and standing
            generation = sum(1 for e in existing if e.subject == word)
            f = Fact(
                id=fact_id(memory.principal, "preference", state, task_type, word, generation),
                kind="preference",
                state=state,
                task_type=task_type,
                subject=word,
                text=text,
                confidence=old.confidence if old else params.initial_confidence,
                provenance=provenance,
                created_n=n,
                updated_n=n,
            )
            if old is not None:
                changed.append(old.model_copy(update={"stage": "superseded", "successor": f.id, "updated_n": n}))
                audit.append(
                    (
                        f"fact:{old.id}:superseded",
                        "SUPERSEDE",
                        old.id,
                        f.id,
                        f"preference on {word!r} superseded by the human's newer words",
                    )
                )
            else:
                room -= 1
            live[word] = f
            new.append(f)
        for f in new:
            memory.record(_fact_chunk(memory, f))
        if new or changed:
            memory.store.save_facts([*new, *changed], audit)
            for f in changed:
                memory.index.set_field(f.id, "status", "superseded")
        out.extend(new)
    return out


_QUESTION = re.compile(r"[^.!?\n]*\?")


def questions(text: str) -> list[str]:
    """The human's questions in an answer, in order."""
    return [" ".join(q.split()) for q in _QUESTION.findall(text) if len(q.split()) >= 3]


def extract_procedures(
    memory: PrincipalMemory, contexts: Iterable[tuple[str, str]], n: int, params: FactParams
) -> list[Fact]:
    """New procedures of these contexts: a check the human keeps asking for. Idempotent
    like `extract`."""
    if not params.procedures:
        return []
    out: list[Fact] = []
    for state, task_type in sorted(set(contexts)):
        answers = memory.store.recent_human_replies("gate", state, task_type, params.lookback)
        asked = [(c, q, words) for c in answers for q, words in _asked(c.human_response)]
        per_answer: dict[str, set[str]] = {}
        for c, _, words in asked:
            per_answer.setdefault(c.id, set()).update(words)
        counts = Counter(w for words in per_answer.values() for w in words)  # answers asking about each word
        existing = memory.store.facts("procedure", state, task_type)
        known = {f.subject for f in existing if f.live}
        room = params.per_context - len(known)
        new = []
        for word, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            if k < params.procedure_min or room <= 0:
                break
            if word in known:
                continue
            sources = [(c, q) for c, q, words in asked if word in words]  # newest first
            generation = sum(1 for e in existing if e.subject == word)
            new.append(
                Fact(
                    id=fact_id(memory.principal, "procedure", state, task_type, word, generation),
                    kind="procedure",
                    state=state,
                    task_type=task_type,
                    subject=word,
                    text=clip(sources[0][1], FACT_CHARS),
                    confidence=params.initial_confidence,
                    provenance=list(dict.fromkeys(c.id for c, _ in sources))[:10],
                    activations=k,
                    created_n=n,
                    updated_n=n,
                )
            )
            known.add(word)
            room -= 1
        for f in new:
            memory.record(_fact_chunk(memory, f))
        if new:
            memory.store.save_facts(new)
        out.extend(new)
    return out


def procedure_uses(memory: PrincipalMemory, record: OutcomeRecord, params: FactParams) -> list[Fact]:
    """The context's live procedures this human answer asks again: one activation each."""
    if not params.procedures or record.answered_by is not AnsweredBy.human:
        return []
    asked = {w for q in questions(record.response_text) for w in concern_words(q)}
    if not asked:
        return []
    req = record.request
    return [
        f.model_copy(update={"activations": f.activations + 1, "updated_n": record.n})
        for f in memory.store.facts("procedure", req.state.value, req.task_type)
        if f.live and f.subject in asked
    ]


def after_consolidation(
    memory: PrincipalMemory, plan: ConsolidationPlan, params: FactParams, extractor: Extractor | None = None
) -> list[Fact]:
    """The session's contexts learn their facts from the answers just consolidated."""
    chunks = memory.store.get_chunks([d.chunk_id for d in plan.decisions], with_traces=False)
    return learn(memory, {(c.state, c.task_type) for c in chunks}, memory.counter(), params, extractor)


def learn(
    memory: PrincipalMemory,
    contexts: Iterable[tuple[str, str]],
    n: int,
    params: FactParams,
    extractor: Extractor | None = None,
) -> list[Fact]:
    """Preferences and procedures of these contexts, at N."""
    contexts = set(contexts)
    return extract(memory, contexts, n, params, extractor) + extract_procedures(memory, contexts, n, params)


class FactMoves(NamedTuple):
    changed: list[Fact]
    audit: list[tuple[str, str, str, str | None, str]]
    met_again: list[str]  # confirmed preferences, procedures asked again: a trace each


def hindsight(memory: PrincipalMemory, record: OutcomeRecord, params: FactParams) -> FactMoves:
    """How this human answer moves the context's live facts, for the outcome's own
    transaction, so that an answer moves them once. Preferences
    move by Hindsight's rule; procedures it asks again gain an activation."""
    used = procedure_uses(memory, record, params)
    met_again = [f.id for f in used]
    if not params.preferences or record.answered_by is not AnsweredBy.human:
        return FactMoves(used, [], met_again)
    req = record.request
    facts = [f for f in memory.store.facts("preference", req.state.value, req.task_type) if f.live]
    if not facts:
        return FactMoves(used, [], met_again)
    words = concern_words(record.response_text)
    artifact = concern_words(req.artifact_text)
    changed: list[Fact] = []
    audit: list[tuple[str, str, str, str | None, str]] = []
    for f in facts:
        c = f.confidence
        if record.action in (Action.correct, Action.reject) and f.subject in words:
            c = c + params.alpha * (1.0 - c)
            update = {"confirmations": f.confirmations + 1}
            met_again.append(f.id)
        elif record.action is Action.approve and f.subject not in artifact:
            c = c - params.hindsight_factor * params.alpha * c
            update = {"disconfirmations": f.disconfirmations + 1}
        else:
            continue
        c = min(1.0, max(0.0, c))
        stage = f.stage
        if c < params.deactivate_at:
            stage = "deactivated"
            audit.append(
                (
                    f"fact:{f.id}:deactivated",
                    "DEACTIVATE",
                    f.id,
                    None,
                    f"preference on {f.subject!r} disconfirmed: confidence {c:.2f} < {params.deactivate_at:g}",
                )
            )
        elif c >= params.confirm_at:
            stage = "confirmed"
        changed.append(
            f.model_copy(update={**update, "confidence": round(c, 6), "stage": stage, "updated_n": record.n})
        )
    return FactMoves(used + changed, audit, met_again)


def after_hindsight(memory: PrincipalMemory, moves: FactMoves, n: int) -> None:
    """Once the answer's transaction wrote them: facts no longer live leave the index's
    retrieval, the ones met again get a trace (ACT-R's new presentation)."""
    for f in moves.changed:
        if not f.live:
            memory.index.set_field(f.id, "status", "superseded")
    if moves.met_again:
        memory.reinforce(moves.met_again, n)
