"""record_outcome's bookkeeping (the design's "Learning from Outcomes"), as pure functions.

One `ContextEntry` per (state, task_type), in the format of `proxy-confidence.json`.
Only human answers teach: counters, EMA, differentials, question patterns, artifact
lengths and prediction accuracy move on a human answer; a proxy answer only bumps
`proxy_answer_count`, so the proxy never learns from itself. The EMA is a health
monitor only: nothing in calibration reads it.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, Field

from vicar.models import Action, AnsweredBy, OutcomeRecord, RequestKind
from vicar.proxy.concerns import CATEGORIES, categories_in, strip_tags

EMA_ALPHA = 0.3
REGRET_WEIGHT = 3  # a correction (or rejection) moves the EMA like three approvals
MAX_DIFFERENTIALS = 20
MAX_ARTIFACT_LENGTHS = 20
MAX_QUESTION_PATTERNS = 20

# Sentence ends other than '?': a question is the run of text before a '?' back to the
# previous end. Split, not a regex scan: `[^.?!\n]*\?` retried every start of a run
# with no '?' and was quadratic in the text's length.
_SENTENCE_END = re.compile(r"[.!\n]")


def concerns_in(text: str) -> list[str]:
    """The design categories a question raises, in the vocabulary's order (vicar.proxy.concerns)."""
    found = categories_in(strip_tags(text))
    return [name for name in CATEGORIES if name in found]


def questions_in(text: str) -> list[str]:
    """The questions in a text (each with its '?'), in order. Linear in the text."""
    found = (q.lstrip() + "?" for sentence in _SENTENCE_END.split(text) for q in sentence.split("?")[:-1])
    return [q for q in found if len(q) > 3]


class Differential(BaseModel):
    outcome: str
    summary: str  # the human's actual response
    reasoning: str  # the question that was asked
    predicted_response: str  # what the proxy predicted
    timestamp: str


class QuestionPattern(BaseModel):
    question: str
    concerns: list[str] = Field(default_factory=list)
    timestamp: str


class ContextEntry(BaseModel):
    state: str
    task_type: str
    approve_count: int = 0
    correct_count: int = 0
    reject_count: int = 0
    hold_count: int = 0
    withdraw_count: int = 0
    total_count: int = 0
    last_updated: str = ""  # YYYY-MM-DD of the last human answer, as the design's file has it
    last_human_at: datetime | None = None  # the same to the second: the staleness guard reads it
    differentials: list[Differential] = Field(default_factory=list)
    ema_approval_rate: float | None = None
    artifact_lengths: list[int] = Field(default_factory=list)
    question_patterns: list[QuestionPattern] = Field(default_factory=list)
    prediction_correct_count: int = 0  # posterior predicted the human's action
    prediction_total_count: int = 0
    prior_correct_count: int = 0
    prior_total_count: int = 0
    proxy_answer_count: int = 0  # gates the proxy answered alone (not learned from)


class ConfidenceModel(BaseModel):
    """The whole of `proxy-confidence.json`."""

    global_threshold: float = 0.8
    generative_threshold: float = 0.95
    entries: dict[str, ContextEntry] = Field(default_factory=dict)


def context_key(state: str, task_type: str, kind: RequestKind = RequestKind.gate) -> str:
    """The design's "{STATE}|{task_type}"; agents' questions keep their own entries, so
    they never move a gate's approval counts or accuracy."""
    return f"{state}|{task_type}" + ("" if kind is RequestKind.gate else f"|{kind.value}")


def load_entry(stored: str | None) -> ContextEntry | None:
    return ContextEntry.model_validate_json(stored) if stored else None


def _ema(previous: float | None, action: Action) -> float:
    x = 1.0 if action is Action.approve else 0.0
    if previous is None:
        return x
    weight = REGRET_WEIGHT if action in (Action.correct, Action.reject) else 1
    keep = (1.0 - EMA_ALPHA) ** weight
    return keep * previous + (1.0 - keep) * x


def apply_outcome(entry: ContextEntry | None, record: OutcomeRecord) -> ContextEntry:
    """The entry after one outcome. Pure; the caller makes it happen once per gate."""
    req = record.request
    e = (entry or ContextEntry(state=req.state.value, task_type=req.task_type)).model_copy(deep=True)
    if record.answered_by is not AnsweredBy.human:
        e.proxy_answer_count += 1
        return e
    action = record.action
    stamp = record.at.date().isoformat() if record.at else ""
    counter = f"{action.value}_count"
    if hasattr(e, counter):
        setattr(e, counter, getattr(e, counter) + 1)
    e.total_count += 1
    if record.at is not None:
        e.last_updated = stamp
        e.last_human_at = record.at
    e.ema_approval_rate = _ema(e.ema_approval_rate, action)
    predicted = record.posterior.prose if record.posterior else ""
    e.differentials = (
        e.differentials
        + [
            Differential(
                outcome=action.value,
                summary=record.response_text,
                reasoning=req.question,
                predicted_response=predicted,
                timestamp=stamp,
            )
        ]
    )[-MAX_DIFFERENTIALS:]
    if req.artifact_text:
        e.artifact_lengths = (e.artifact_lengths + [len(req.artifact_text)])[-MAX_ARTIFACT_LENGTHS:]
    human_lines = [record.response_text] + [
        t.text for t in record.dialog if t.speaker == "reviewer" and t.answered_by is AnsweredBy.human
    ]
    new_patterns = [
        QuestionPattern(question=q, concerns=concerns_in(q), timestamp=stamp)
        for line in human_lines
        for q in questions_in(line)
    ]
    e.question_patterns = (e.question_patterns + new_patterns)[-MAX_QUESTION_PATTERNS:]
    if record.posterior is not None:
        e.prediction_total_count += 1
        e.prediction_correct_count += int(record.posterior.action is action)
    if record.prior is not None:
        e.prior_total_count += 1
        e.prior_correct_count += int(record.prior.action is action)
    return e
