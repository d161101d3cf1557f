"""The audit trail's models (docs/audit.md): one record per gate as it is exported, a
review of an answer the proxy gave alone, and the pages and requests that carry them
through Temporal. Pydantic and the standard library only: the workflow sandbox imports it.

AuditRecord is the one home of the export's shape: `vicar audit export -o jsonl` writes
it as JSON, `-o csv` takes its columns from its fields (csv_row), and `vicar schema`
publishes its JSON Schema."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vicar.memory.names import check_principal
from vicar.models import check_responder
from vicar.models.schema_rules import GATE_ID_RE

Verdict = Literal["right", "wrong"]
REVIEW_NOTE_CHARS = 2000
# A page's records, as JSON, stay under this (Temporal refuses payloads over 2 MB; the
# codec's envelope and the page's own fields take a little more).
MAX_PAGE_BYTES = 1_000_000
DEFAULT_PAGE_BYTES = 512_000
MIN_PAGE_BYTES = 1_000
MAX_PAGE_RECORDS = 1_000
# Bounded texts in a record: the artifact's excerpt and each memory's.
ARTIFACT_EXCERPT_CHARS = 1_000
MEMORY_EXCERPT_CHARS = 300
WORKFLOW_ID_CHARS = 400


class MemoryUsed(BaseModel):
    chunk_id: str
    excerpt: str = Field(description='What the memory says, clipped; "" if it is no longer in the store.')


class Review(BaseModel):
    """A reviewer's verdict on an answer the proxy gave alone, after the fact."""

    gate_workflow_id: str
    verdict: Verdict
    reviewer: str = Field(description="The name the reviewer gave (checked against the principal's allow-list).")
    identity: str | None = Field(None, description="The Temporal client identity the review came with.")
    note: str = ""
    at: datetime


class AuditRecord(BaseModel):
    """One gate as the audit trail holds it."""

    principal: str
    gate_id: str
    workflow_id: str = Field(description="The gate's workflow id (what `vicar review` takes too).")
    kind: str = Field(description="gate or question.")
    state: str
    task_type: str
    n: int = Field(description="The gate's place in the principal's sequence (0: it never got one).")
    question: str
    upstream_agent: str | None = None
    artifact_hash: str = Field("", description='Hash of the artifact the gate saw ("": not known).')
    artifact_excerpt: str = Field("", description="The inline artifact's start, clipped.")
    artifact_paths: list[str] = Field(default_factory=list)
    answered_by: str = Field(
        description="human, proxy, nobody (the deadline passed or the gate was cancelled), or a rule."
    )
    responder: str | None = Field(None, description="The named human who answered.")
    responder_identity: str | None = Field(None, description="The Temporal client identity the answer came with.")
    rule: str | None = Field(None, description="The rule that answered or applied, when one did.")
    rule_author: str | None = None
    rule_note: str = Field("", description="What the rule that answered or applied said (never in proxy_words).")
    lineage: str | None = Field(None, description="The kind of action the request named (a hook's bash:git push).")
    ask_first: bool = Field(False, description='Answered with "… but ask me first".')
    timed_out: bool = False
    cancelled: bool = Field(False, description="Cancelled by the orchestrator before anyone answered.")
    escalated: bool = Field(description="The gate went to the human.")
    action: str = Field(description="The answer (hold for a gate that timed out).")
    words: str = Field(description="The answer's words.")
    proxy_action: str | None = Field(None, description="The proxy's prediction of the human's action.")
    proxy_words: str = ""
    score: float | None = Field(None, description="The proxy's score for its prediction (the posterior's).")
    confidence: float | None = Field(None, description="The calibrated confidence shown.")
    threshold: float | None = Field(
        None,
        description="The autonomy rule's threshold in force then, on the confidence's scale (docs/confidence.md).",
    )
    supported: bool | None = Field(None, description="Whether the person's own answers of its kind backed the guess.")
    bound: float | None = Field(None, description="Its error bound then.")
    target: float | None = None
    evidence: int = Field(0, description="The human-answered gates behind the bound.")
    errors: int = Field(0, description="Of those, the ones the proxy would have got wrong.")
    audit_share: float | None = Field(None, description="The chance the rule sent a gate it allowed to the human.")
    guard: str = Field("", description="The guard or rule that decided: why it escalated, or passthrough.")
    guards_fired: list[str] = Field(default_factory=list)
    why: str = Field("", description="The decision's note: the numbers behind reason_words.")
    reason_words: str = Field(
        "", description="Why it went to the human, or was answered without them, in plain words (vicar.proxy.reasons)."
    )
    censors: list[str] = Field(default_factory=list)
    memories: list[MemoryUsed] = Field(default_factory=list, description="The memories the proxy used.")
    dialog_turns: int = 0
    started_at: datetime | None = None
    escalated_at: datetime | None = None
    answered_at: datetime | None = Field(None, description="When it was answered (or timed out).")
    review: Review | None = None

    def csv_row(self) -> dict[str, str]:
        """One CSV row over csv_columns(): lists and objects as JSON, None as "", and text
        a spreadsheet would run as a formula neutralized (csv_text)."""
        out = {}
        for name, value in self.model_dump(mode="json").items():
            out[name] = (
                ""
                if value is None
                else json.dumps(value, ensure_ascii=False)
                if isinstance(value, list | dict)
                else csv_text(value)
                if isinstance(value, str)
                else str(value)
            )
        return out


# A cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets
# (OWASP, "CSV Injection"); a NUL or LF start is refused by some and odd in all.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\x00")


def csv_text(text: str) -> str:
    """`text` as a spreadsheet must show it: with a leading ' when it would start a
    formula (the quote is what spreadsheets take as "this is text"). Numbers are written
    apart (csv_row), so a negative score stays a number."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_columns() -> list[str]:
    return list(AuditRecord.model_fields)


class AuditCursor(BaseModel):
    """Where a page ends: the last seq taken from each of the two logs."""

    outcomes: int = Field(0, ge=0)
    unanswered: int = Field(0, ge=0)


class AuditPageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    principal: str
    after: AuditCursor = Field(default_factory=AuditCursor)
    since: datetime | None = None
    max_bytes: int = Field(DEFAULT_PAGE_BYTES, ge=MIN_PAGE_BYTES, le=MAX_PAGE_BYTES)
    max_records: int = Field(MAX_PAGE_RECORDS, ge=1, le=MAX_PAGE_RECORDS)

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str) -> str:
        return check_principal(v)


class AuditPage(BaseModel):
    records: list[AuditRecord] = Field(default_factory=list)
    cursor: AuditCursor
    done: bool


class MemoryPlace(BaseModel):
    """Where a principal's memory is: its shard (None unsharded) and how long a step
    waits for that shard's owner."""

    shard: int | None = None
    wait_seconds: float = 60.0


class ReviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    principal: str
    gate_workflow_id: str = Field(min_length=1, max_length=WORKFLOW_ID_CHARS)
    verdict: Verdict
    reviewer: str = Field(min_length=1, max_length=64)
    note: str = Field("", max_length=REVIEW_NOTE_CHARS)

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str) -> str:
        return check_principal(v)

    @field_validator("gate_workflow_id")
    @classmethod
    def _workflow_id(cls, v: str) -> str:
        if not GATE_ID_RE.match(v.removeprefix("vicar-gate/")) or not v.isprintable():
            raise ValueError(f"invalid gate workflow id {v[:80]!r}")
        return v

    @field_validator("reviewer")
    @classmethod
    def _reviewer(cls, v: str) -> str:
        return check_responder(v)  # a reviewer is named as a responder is (the allow-list holds both)


# Why a review was refused ("" : recorded).
Refusal = Literal["", "not_found", "not_autonomous", "reviewed", "not_allowed"]


class ReviewResult(BaseModel):
    review: Review | None = None  # the review on record (the earlier one when refused as reviewed)
    new: bool = False  # False: nothing changed (the same review again, or refused)
    refusal: Refusal = ""
    why: str = ""
    state: str = ""
    task_type: str = ""
    question: str = ""
    gate_id: str = ""
    n: int | None = None
    proxy_action: str | None = None
    proxy_words: str = ""
