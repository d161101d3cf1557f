"""How `vicar gate show` and `vicar escalations` lay a gate out on a terminal. Every text
here came from a request, an answer or memory: it goes through vicar.display.text."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from vicar import contracts as c
from vicar.display import text
from vicar.models import GateDetails
from vicar.models.sure import gate_confidence_words
from vicar.models.view import GateView
from vicar.models.vocabulary import CfAState
from vicar.proxy.reasons import details_reason

# The widest state name: the state column never splits one (WORK_ASSERT, INTENT_ASSERT).
STATE_WIDTH = max(len(s.value) for s in CfAState)


def ago(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "?"
    seconds = max(int((now - since).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def due(deadline: datetime | None, now: datetime) -> str:
    if deadline is None:
        return ""
    left = (deadline - now).total_seconds()
    return f"due {ago(now, deadline)}" if left > 0 else f"overdue {ago(deadline, now)}"


def escalations_table(waiting: list[GateDetails], now: datetime) -> Table:
    """One row per gate. Ids fold (a person copies them into `vicar answer`); the state and
    the guard never wrap, so a narrow terminal squeezes the texts, not them."""
    table = Table(title="Waiting for a human", expand=False)
    table.add_column("gate", overflow="fold", ratio=2)
    table.add_column("waited", no_wrap=True)
    table.add_column("state", no_wrap=True, min_width=STATE_WIDTH)
    table.add_column("question · artifact", overflow="fold", ratio=4)
    table.add_column("proxy guess", overflow="fold", ratio=4)
    table.add_column("sure", no_wrap=True)
    guards = [d.calibration_guard for d in waiting]
    table.add_column("guard", no_wrap=True, min_width=max(map(len, guards + ["guard"])))
    for d in waiting:
        gate = d.gate_id if d.workflow_id in ("", c.gate_workflow_id(d.gate_id)) else d.workflow_id
        asked = Text.assemble(text(d.question))
        if d.artifact_excerpt:
            asked.append_text(Text("\n» ", style="dim") + text(d.artifact_excerpt, one_line=True))
        if d.upstream_agent:
            asked.append_text(Text("\nfrom ", style="dim") + text(d.upstream_agent, one_line=True))
        guess = text(f"{d.proxy_action.value}: {d.proxy_text}" if d.proxy_action else d.proxy_text)
        if words := details_reason(d):
            guess.append_text(Text("\nwhy: ", style="dim") + text(words))
        if d.calibration_note:
            guess.append_text(Text("\ndetail: ", style="dim") + text(d.calibration_note, style="dim"))
        for t in d.dialog:
            guess.append_text(text(f"\n{t.speaker}{f' ({t.responder})' if t.responder else ''}: {t.text}"))
        waited = ago(d.escalated_at, now) + (f"\n{due(d.deadline, now)}" if d.deadline else "")
        table.add_row(
            text(gate) + Text("\n") + text(d.principal, style="dim"),
            Text(waited),
            text(d.state.value) + Text("\n") + text(d.task_type),
            asked,
            guess,
            Text(gate_confidence_words(d).split(";")[0]),  # the listing's short form: "83% sure"
            text(d.calibration_guard),
        )
    return table


def _section(title: str, body: RenderableType | str) -> Group:
    return Group(text(title, style="bold"), Padding(text(body) if isinstance(body, str) else body, (0, 0, 0, 2)))


def gate_page(v: GateView, now: datetime | None = None) -> Group:
    """Everything about one gate, top to bottom: what is asked, about what, what the proxy
    would say and from whose words, what has been said, and how it ended."""
    now = now or datetime.now(UTC)
    parts: list[RenderableType] = []
    head = text(f"gate {v.gate_id}", style="bold") + text(f"  ({v.workflow_id})", style="dim")
    parts.append(head)
    facts = [f"status {v.status}", f"{v.principal}", f"{v.state} / {v.task_type}"]
    if v.escalation_mode:
        facts.append(f"mode {v.escalation_mode}")
    if v.workflow_status != "running":
        facts.append(f"workflow {v.workflow_status}")
    parts.append(text(" · ".join(facts)))
    when = [f"started {ago(v.started_at, now)} ago"]
    if v.escalated_at:
        when.append(f"escalated {ago(v.escalated_at, now)} ago")
    if v.deadline:
        when.append(f"deadline {v.deadline.isoformat(timespec='seconds')} ({due(v.deadline, now)})")
    parts.append(text(" · ".join(when)))
    if v.upstream_agent:
        parts.append(text(f"from agent {v.upstream_agent}"))
    lineage = " · ".join(x for x in (v.title, v.lineage or "", f"revision {v.revision}" if v.revision else "") if x)
    if lineage:
        parts.append(text(f"lineage: {lineage}"))
    parts.append(_section("Question", v.question))
    if v.actor_message:
        parts.append(_section("Actor message", v.actor_message))
    if v.artifact_text:
        cut = (
            f" (first {len(v.artifact_text):,} of {v.artifact_text_chars:,} characters)" if v.artifact_truncated else ""
        )
        parts.append(_section(f"Artifact{cut}", v.artifact_text))
    for f in v.artifact_files:
        body = f.excerpt + ("\n… (cut)" if f.truncated else "") if not f.error else f"({f.error})"
        parts.append(_section(f"File {f.path}", body))
    if v.artifact_files_note:
        parts.append(text(f"files: {v.artifact_files_note}", style="dim"))
    guess = f"{v.proxy_action}: " if v.proxy_action else ""
    said = gate_confidence_words(v)
    conf = f" ({said})" if said else ""
    parts.append(_section(f"Proxy's guess{conf}", guess + (v.proxy_text or "(nothing)")))
    if why := _why(v):
        parts.append(why)
    if v.prereview:
        rows = []
        for i, item in enumerate(v.prereview, 1):
            answered_at = v.prereview_dates.get(item.gate_id)
            day = f", {answered_at.date().isoformat()}" if answered_at else ""
            rows.append(
                f"{i}. {item.text}\n   — {item.action} on gate {item.gate_id or item.chunk_id}{day} "
                f"(interaction {item.n})"
                + (", this lineage" if item.lineage else "")
                + (f", {note}" if (note := item.source_note(v.task_type)) else "")
            )
        parts.append(_section("Their own past words (pre-review, the evidence)", "\n".join(rows)))
    if v.lineage_verdicts:
        rows = [
            f"- {lv.action} (interaction {lv.n}, {lv.ago} ago"
            + (f", revision {lv.revision}" if lv.revision else "")
            + (", changed since" if lv.changed_since else "")
            + (f"): {lv.response}" if lv.response else ")")
            for lv in v.lineage_verdicts
        ]
        parts.append(_section("Their earlier verdicts on this lineage", "\n".join(rows)))
    if v.unsupported:
        parts.append(_section("Raised without support in their words", "\n".join(f"- {u}" for u in v.unsupported)))
    if v.dialog:
        lines = [f"{t.speaker}{_who(t.answered_by, t.responder)}: {t.text}" for t in v.dialog]
        parts.append(_section("Dialog", "\n".join(lines)))
    if v.result is not None:
        r = v.result
        who = r.answered_by.value + (f" {r.responder}" if r.responder else "")
        extra = " (timed out)" if r.timed_out else ""
        parts.append(_section(f"Result: {r.action.value} by {who}{extra}", r.text or "(no words)"))
    elif v.ended:
        parts.append(_section(f"Ended without a result ({v.workflow_status})", v.ended))
    elif v.status == "escalated":
        parts.append(text(f'Answer with: vicar answer {v.gate_id} ACTION "text"', style="dim"))
    return Group(*parts)


def _why(v: GateView) -> Group | None:
    """Why the gate came to the person ("Why it came to you"), or why it was answered
    without them ("Why it answered"): the reason in words, then the guard and its
    numbers as the detail. Nothing while the gate is still deciding."""
    went = v.result.escalated if v.result is not None else (v.status == "escalated" or v.escalated_at is not None)
    if not (v.reason_words or v.calibration_note) or (v.result is None and not went):
        return None
    title = "Why it came to you" if went else "Why it answered"
    guard = v.calibration_guard or "?"
    # An `always` gate's passthrough is not a reason: no guard fired, the mode asked.
    said = "no guard fired" if guard == "passthrough" and went else f"guard {guard}"
    detail = f"detail ({said}): {v.calibration_note}" if v.calibration_note else f"detail: {said}"
    lines = [v.reason_words, detail] if v.reason_words else [detail]
    return _section(title, "\n".join(lines))


def _who(by: object, responder: str | None) -> str:
    """(human bo), (proxy): who spoke for the person on a reviewer line."""
    if by is None:
        return ""
    name = getattr(by, "value", str(by))
    return f" ({name} {responder})" if responder else f" ({name})"
