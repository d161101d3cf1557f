"""What the gate page shows: `vicar.client.view.GateView` (everything `vicar gate show`
shows), the artifact split into diff lines when it is a diff (a file the worker read as
much as the inline text), how many lines a cut artifact hides (or, asked for, the whole
of it: the request's own text), and the date of each pre-review item's source gate (its
evidence: the person's own words, and when)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from vicar.diffs import diff_lines, looks_like_diff
from vicar.inbox.web import Inbox
from vicar.models.prereview import PreReviewItem
from vicar.models.view import GateView, excerpt_line
from vicar.models.vocabulary import QUESTION_ACTIONS, VALID_ACTIONS, CfAState

EVIDENCE_SHOWN = 8


@dataclass
class Evidence:
    item: PreReviewItem
    when: datetime | None  # when its gate was answered, while Temporal holds that gate


@dataclass
class GatePage:
    v: GateView
    diff: list[tuple[str, str]] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    file_diffs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # by path: a file that is a diff
    hidden_lines: int = 0  # lines of the inline artifact past the view's cut
    excerpt: str = ""  # the artifact's start, as the list's card shows it
    files_refused: str = ""  # the files the worker would not or could not read, in words
    file_errors: dict[str, str] = field(default_factory=dict)  # by path: why it is not shown, in words
    whole: bool = False  # the whole inline artifact is on the page (asked for, past the view's cut)

    @property
    def cut(self) -> bool:
        """Part of the inline artifact is not on the page."""
        return self.v.artifact_truncated and not self.whole

    @property
    def waiting(self) -> bool:
        return self.v.workflow_status == "running" and self.v.status == "escalated"

    @property
    def actions(self) -> list[str]:
        if self.v.kind == "question":
            return [a.value for a in QUESTION_ACTIONS]
        try:
            return [a.value for a in VALID_ACTIONS[CfAState(self.v.state)]]
        except ValueError:
            return ["approve", "correct", "reject", "hold"]


async def load_gate(inbox: Inbox, workflow_id: str, whole: bool = False) -> GatePage:
    """The page of one gate; `whole`: with all of a cut inline artifact (read from the
    request the gate started with)."""
    from vicar.client.view import gate_view

    view = await gate_view(inbox.client, workflow_id)
    page = page_from_view(view)
    if view.artifact_truncated:
        full = await _request_text(inbox, view.workflow_id)
        rest = full[len(view.artifact_text) :]
        page.hidden_lines = rest.count("\n") + (1 if rest and not rest.endswith("\n") else 0)
        if whole and full:
            page.whole = True
            page.v = view.model_copy(update={"artifact_text": full})
            page.diff = diff_lines(full) if looks_like_diff(full) else []
    return page


def page_from_view(view: GateView) -> GatePage:
    """What the page shows of a view, but the hidden lines (those need the request)."""
    page = GatePage(v=view)
    if looks_like_diff(view.artifact_text):
        page.diff = diff_lines(view.artifact_text)
    for f in view.artifact_files:
        if f.excerpt and looks_like_diff(f.excerpt):
            page.file_diffs[f.path] = diff_lines(f.excerpt)
    page.excerpt = excerpt_line(view.artifact_text) or next(
        (excerpt_line(f.excerpt) for f in view.artifact_files if f.excerpt), ""
    )
    page.file_errors = {f.path: _file_words(f.error) for f in view.artifact_files if f.error}
    page.files_refused = "; ".join(f"{path}: {why}" for path, why in page.file_errors.items())
    items = view.prereview[:EVIDENCE_SHOWN]
    # gate_view dated them (each source gate's close, while Temporal keeps it)
    page.evidence = [Evidence(i, view.prereview_dates.get(i.gate_id)) for i in items]
    return page


def _file_words(error: str) -> str:
    """Why a file is not shown, in a reviewer's words (the worker's log has the rest)."""
    from vicar.inbox.cards import refused_words

    return refused_words(error) if error.startswith("artifact path ") else error


async def _request_text(inbox: Inbox, workflow_id: str) -> str:
    """The inline artifact as the gate was asked it (the gate's first history event:
    read only for a cut artifact)."""
    from vicar.client.gates import started_with

    req = await started_with(inbox.client.get_workflow_handle(workflow_id))
    return req.artifact_text if req else ""
