"""What the gate page shows: `vicar.client.view.GateView` (everything `vicar gate show`
shows), the artifact split into diff lines when it is a diff, and the date of each
pre-review item's source gate (its evidence: the person's own words, and when)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from vicar.diffs import diff_lines, looks_like_diff
from vicar.inbox.web import Inbox
from vicar.models.prereview import PreReviewItem
from vicar.models.view import GateView
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


async def load_gate(inbox: Inbox, workflow_id: str) -> GatePage:
    from vicar.client.view import gate_view

    view = await gate_view(inbox.client, workflow_id)
    page = GatePage(v=view)
    if looks_like_diff(view.artifact_text):
        page.diff = diff_lines(view.artifact_text)
    items = view.prereview[:EVIDENCE_SHOWN]
    # gate_view dated them (each source gate's close, while Temporal keeps it)
    page.evidence = [Evidence(i, view.prereview_dates.get(i.gate_id)) for i in items]
    return page
