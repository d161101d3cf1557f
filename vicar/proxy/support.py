"""Support: whether the person's own answers back a lone answer on this kind of action.

The autonomy rule's bound is pooled over the person's gates: it says how often the
proxy errs on the gates it scores high, not whether this gate is like anything the person
has answered. A hundred approvals of `git status` prove a threshold, and a never-seen
`rm -rf` scoring above it would pass. So a gate is answered alone only where the
person's own answers of its kind of action back the proposed answer:

- its kind: for a gate whose request names its lineage (the coding-agent hooks name the
  tool and the command's program and subcommand, `bash:git push`; an orchestrator names
  its thread), that lineage within the task type; otherwise its state and task type;
- at least `support_answers` of the person's answers of that kind, close to this gate in
  the memory's embedding space (cosine of the artifacts at least `support_similarity`,
  among the latest `support_look` of the kind, or the nearest `support_look` for a kind
  that is a whole task type), every one of them the proposed answer: no contrary answer
  there;
- counted only since the person last said "wrong" of a lone answer of this kind: a
  "wrong" withdraws the kind at once, and the person's own answers re-earn it;
- not counting the answers to gates a rule or pause of the person's sent to them: those
  are the person's decisions about what their rule singled out, not the kind's habit;
- never where one of those close answers was given with "ask me first": the person said
  that kind is theirs to decide.

Support is chosen by the request and the person's past answers, never by the gate's own
label, so the bound over the gates above the threshold stays valid; it only narrows which
of them are answered alone. What it covers is in docs/autonomy-bound.md.
"""

from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

import numpy as np

from vicar.memory.chunk import ARTIFACT_EMBED_CHARS, MemoryChunk, situation_text
from vicar.memory.principal import PrincipalMemory
from vicar.memory.retrieval import Query, RetrievalMode
from vicar.memory.store import RecordStore
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, Support
from vicar.models.sure import ANSWERS_DIFFER, NEW_KIND, NO_GUESS
from vicar.models.sure import ASKED_FIRST as ASKED_FIRST_LABEL
from vicar.settings import CalibrationParams


def action_kind(request: GateRequest) -> str:
    """The kind of action a gate is, as a key: its lineage within its task type where the
    request names one, else its state and task type."""
    base = f"{request.kind.value}|{request.state.value}|{request.task_type}"
    return f"{base}|{request.lineage}" if request.lineage else base


def kind_words(request: GateRequest) -> str:
    if request.lineage:
        tool, sep, what = request.lineage.partition(":")
        return f"“{what}” ({tool})" if sep and what else f"“{request.lineage}”"
    return f"{request.task_type} gates" if request.task_type else "gates like this"


# -- the person's "wrong" per kind ----------------------------------------------------


class _Wrongs:
    """Per kind, the interaction number of the latest gate the person said the proxy got
    wrong, read incrementally from the reviews (one process holds a memory)."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.latest: dict[str, int] = {}

    def update(self, store: RecordStore) -> None:
        with store.reading() as db:
            rows = db.execute(
                "SELECT r.seq, o.record FROM reviews r JOIN outcomes o ON o.workflow_id = r.workflow_id"
                " WHERE r.seq > ? AND r.verdict = 'wrong' ORDER BY r.seq",
                (self.last_seq,),
            ).fetchall()
            top = db.execute("SELECT COALESCE(MAX(seq), 0) FROM reviews").fetchone()[0]
        for _, record in rows:
            rec = OutcomeRecord.model_validate_json(record)
            key = action_kind(rec.request)
            self.latest[key] = max(self.latest.get(key, -1), rec.n)
        self.last_seq = max(self.last_seq, top)


_wrongs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_wrongs_lock = threading.Lock()


def last_wrong(store: RecordStore, key: str) -> int | None:
    """The interaction number of the latest gate of this kind the person marked wrong."""
    with _wrongs_lock:
        book = _wrongs.get(store)
        if book is None:
            book = _wrongs[store] = _Wrongs()
        book.update(store)
        return book.latest.get(key)


# -- support ------------------------------------------------------------------------


class _Answer(NamedTuple):
    outcome: str
    similarity: float | None
    ask_first: bool = False


def _query_text(request: GateRequest, artifact: str) -> dict[str, str]:
    text = artifact[:ARTIFACT_EMBED_CHARS]
    if text.strip():
        return {"artifact": text}
    return {"situation": situation_text(request.state.value, request.task_type, request.question)}


def _cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else None


RULED, ASK_FIRST = "ruled", "ask_first"  # vicar.proxy.outcomes writes these marks


def _marks(store: RecordStore, chunks: list[MemoryChunk]) -> dict[str, set[str]]:
    """Per chunk, what its answer said beyond its action (answer_marks): a gate a rule or
    pause of the person's sent to them, an answer given with "ask me first"."""
    if not chunks:
        return {}
    places = ", ".join("?" * len(chunks))
    with store.reading() as db:
        rows = db.execute(
            f"SELECT chunk_id, mark FROM answer_marks WHERE chunk_id IN ({places})", [c.id for c in chunks]
        ).fetchall()
    out: dict[str, set[str]] = {}
    for cid, mark in rows:
        out.setdefault(cid, set()).add(mark)
    return out


def _lineage_answers(
    memory: PrincipalMemory, request: GateRequest, n: int, artifact: str, since: int, look: int
) -> list[_Answer]:
    """The latest answers on the gate's lineage (within its task type) after `since`,
    each with its artifact's similarity to this one."""
    chunks = [
        c
        for c in memory.lineage_history(request.kind.value, request.lineage or "", n, look)
        if c.created_n > since and c.task_type == request.task_type and c.state == request.state.value
    ]
    marks = _marks(memory.store, chunks)
    chunks = [c for c in chunks if RULED not in marks.get(c.id, ())]
    if not chunks:
        return []
    texts = _query_text(request, artifact)
    dim, q = next(iter(memory.query_vectors(texts).items()), (None, None))
    out = []
    for c in chunks:
        vec = memory.index.vectors_of(c.id, (dim,)).get(dim) if dim and c.id in memory.index.pos else None
        similarity = _cosine(q, vec) if q is not None and vec is not None else None
        out.append(_Answer(c.outcome, similarity, ASK_FIRST in marks.get(c.id, ())))
    return out


def _nearest_answers(
    memory: PrincipalMemory, request: GateRequest, n: int, artifact: str, since: int, look: int
) -> list[_Answer]:
    """The person's answers in the gate's state and task type nearest this gate."""
    query = Query(
        now=n,
        filters={
            "kind": request.kind.value,
            "state": request.state.value,
            "task_type": request.task_type,
            "answered_by": AnsweredBy.human.value,
        },
        texts=_query_text(request, artifact),
        mode=RetrievalMode.similarity,
        top_k=look,
    )
    hits: list[tuple[float | None, MemoryChunk]] = [(h.similarity, c) for h, c in memory.retrieve(query)]
    marks = _marks(memory.store, [c for _, c in hits])
    return [
        _Answer(c.outcome, sim, ASK_FIRST in marks.get(c.id, ()))
        for sim, c in hits
        if c.created_n > since and RULED not in marks.get(c.id, ())
    ]


def support_of(
    memory: PrincipalMemory,
    request: GateRequest,
    n: int,
    artifact: str,
    action: Action | None,
    params: CalibrationParams,
) -> Support:
    """Whether the person's own answers of this gate's kind back `action` (the proxy's
    proposed answer) alone; with the words that say why and what to show instead of a
    percentage where they do not."""
    judged = _judge(memory, request, n, artifact, action, params)
    return judged.model_copy(update={"label": support_label(judged)})


def _judge(
    memory: PrincipalMemory,
    request: GateRequest,
    n: int,
    artifact: str,
    action: Action | None,
    params: CalibrationParams,
) -> Support:
    need, close_at, look = params.support_answers, params.support_similarity, params.support_look
    what = kind_words(request)
    wrong = last_wrong(memory.store, action_kind(request))
    since = -1 if wrong is None else wrong
    find = _lineage_answers if request.lineage else _nearest_answers
    answers = find(memory, request, n, artifact, since, look)
    close = [a for a in answers if a.similarity is not None and a.similarity >= close_at]
    agreeing = sum(1 for a in close if action is not None and a.outcome == action.value)
    contrary = len(close) - agreeing
    nearest = max((a.similarity for a in answers if a.similarity is not None), default=None)
    base = dict(kind=what, answers=len(close), agreeing=agreeing, contrary=contrary, nearest=nearest, needed=need)
    if action is None:
        return Support(supported=False, no_guess=True, words="Vicar has no guess to stand on", **base)
    if any(a.ask_first for a in close):
        return Support(
            supported=False, asked_first=True, words=f"you asked to be asked first about {what} like this", **base
        )
    if contrary:
        return Support(
            supported=False,
            words=f"your answers to {what} like this one differ ({agreeing} {action.value}, {contrary} other)",
            **base,
        )
    if len(close) >= need:
        return Support(supported=True, words=f"{len(close)} of your answers to {what} like this back it", **base)
    if wrong is not None:
        return Support(
            supported=False,
            marked_wrong=True,
            words=f"you said Vicar was wrong on {what}; it asks you until {need} more of your answers back it "
            f"({len(close)} so far)",
            **base,
        )
    if not answers:
        return Support(
            supported=False, new=True, words=f"a kind of action you have not answered before: {what}", **base
        )
    if not close:
        return Support(supported=False, new=True, words=f"unlike the {what} you have answered before", **base)
    return Support(
        supported=False,
        new=True,
        words=f"you have answered {what} like this {len(close)} time{'s' if len(close) != 1 else ''}; "
        f"Vicar answers alone only after {need}",
        **base,
    )


def support_label(support: Support | None) -> str:
    """What to show instead of a percentage where the person's answers do not back the
    guess ("" where they do, or where support was not judged)."""
    if support is None or support.supported:
        return ""
    if support.no_guess:
        return NO_GUESS
    if support.asked_first:
        return ASKED_FIRST_LABEL
    return NEW_KIND if support.new or support.marked_wrong else ANSWERS_DIFFER
