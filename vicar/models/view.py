"""What one gate shows a person (`vicar gate show`, `GateHandle.view()`, the inbox's
gate page): the pydantic models only, importable inside the workflow sandbox (the gate
keeps its artifact excerpts as `ArtifactFile`s)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from vicar.diffs import changed_lines
from vicar.models import DialogTurn, GateResult, LineageVerdict
from vicar.models.prereview import PreReviewItem

# All the artifact a view carries, inline text and file excerpts together: enough to
# judge a plan or a diff, bounded so a 200 kB artifact does not flood a terminal or a page.
VIEW_ARTIFACT_CHARS = 20_000
# The one-line excerpt in listings, the memo, the webhook and chat messages.
LINE_EXCERPT_CHARS = 120


class ArtifactFile(BaseModel):
    """An excerpt of one file the gate named, as the worker read it."""

    path: str
    excerpt: str = ""
    truncated: bool = Field(False, description="The file goes on past the excerpt.")
    error: str = Field("", description="Why there is no excerpt (refused, unreadable).")


class GateView(BaseModel):
    """Everything about one gate, waiting or finished."""

    gate_id: str
    workflow_id: str
    workflow_status: str = Field(description="running, completed, failed, cancelled, terminated, timed_out...")
    status: str = Field(description="The gate's own status (queued, consulting, escalated, done...).")
    kind: str = "gate"
    principal: str
    state: str
    task_type: str
    question: str
    escalation_mode: str = ""
    actor_message: str = ""
    upstream_agent: str | None = None
    title: str = ""
    lineage: str | None = None
    revision: str | None = None
    session_id: str | None = None
    artifact_text: str = Field("", description="The inline artifact, cut at the view's bound.")
    artifact_text_chars: int = Field(0, description="The inline artifact's full length.")
    artifact_truncated: bool = False
    artifact_files: list[ArtifactFile] = Field(default_factory=list)
    artifact_files_note: str = Field("", description="Why the files' excerpts are missing, when they are.")
    started_at: datetime | None = None
    escalated_at: datetime | None = None
    deadline: datetime | None = None
    closed_at: datetime | None = None
    n: int | None = None
    proxy_action: str | None = None
    proxy_text: str = Field("", description="The proxy's words: its guess at the person's answer.")
    proxy_confidence: float | None = None
    autonomy_threshold: float | None = Field(
        None, description="The confidence from which the proxy acts alone, on the same scale (docs/confidence.md)."
    )
    proxy_supported: bool | None = Field(
        None, description="Whether the person's own answers of this kind of action back the proxy's guess."
    )
    proxy_support_label: str = Field("", description="Where they do not, what is shown instead of a percentage.")
    calibration_guard: str = Field("", description="Why it escalated (or answered): the guard that decided.")
    calibration_note: str = Field("", description="The numbers behind the reason (the detail).")
    reason_words: str = Field(
        "",
        description="Why the gate came to the person, or why it was answered without them, in plain words "
        "(vicar.proxy.reasons); calibration_note holds the numbers behind it.",
    )
    prereview: list[PreReviewItem] = Field(
        default_factory=list, description="The person's own past words on this lineage and similar work (evidence)."
    )
    prereview_dates: dict[str, datetime] = Field(
        default_factory=dict,
        description="When each pre-review item's gate was answered (its workflow's close), by gate id, where "
        "Temporal still keeps that gate.",
    )
    unsupported: list[str] = Field(default_factory=list, description="Concerns the proxy raised that no item backs.")
    lineage_verdicts: list[LineageVerdict] = Field(
        default_factory=list, description="The person's latest verdicts on this artifact's lineage, latest first."
    )
    dialog: list[DialogTurn] = Field(default_factory=list)
    result: GateResult | None = None
    ended: str = Field("", description="Why a gate that ended without a result did (failed, cancelled...).")
    details_from: str = Field(
        "", description="Where the live details came from: query (a worker answered), memo (visibility), or none."
    )


class ExcerptInput(BaseModel):
    """What the gate asks the worker to read for its view: the request's paths, within
    a budget of characters over all of them."""

    paths: list[str]
    budget: int = VIEW_ARTIFACT_CHARS


def excerpt_line(text: str, limit: int = LINE_EXCERPT_CHARS) -> str:
    """The start of `text` on one line (blanks collapsed), at most `limit` characters:
    a listing's glimpse of the artifact, which may span several short lines. A unified
    diff's glimpse is its first changed lines, not the headers that would fill it."""
    flat = changed_lines(text, limit) or " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
