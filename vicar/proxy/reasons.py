"""Why a gate came to the person (or why it did not), in words a reviewer reads at a
glance: the one place that turns the guard that decided and the calibration's numbers
into a sentence. `vicar gate show`, the inbox (through GateView.reason_words), the audit
export and the demo all show these words; the guard's note (the numbers behind the
sentence: bounds, thresholds, memory ids) stays beside them as the detail.

Pure and light (no I/O, no numpy): the gate view, the audit trail and the demo call it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vicar.errors import ARTIFACT_REFUSED
from vicar.models import GateDetails
from vicar.models.default_rules import AUTHOR as DEFAULT_AUTHOR
from vicar.models.sure import ANSWERS_DIFFER, ASKED_FIRST, NEW_KIND, NO_GUESS, confidence_words  # noqa: F401
from vicar.models.sure import pct as _pct

# The guard names the gate and the calibration write (vicar.proxy.calibration.GUARDS and
# the gate's own: a pause, a rule, a proxy that could not run).
PAUSED, RULE, PROXY_ERROR, PASSTHROUGH = "paused", "rule", "proxy_error", "passthrough"


@dataclass(frozen=True)
class ReasonFacts:
    """What the words are made from. `escalated`: True when the gate went (or is waiting)
    to the person, False when it was answered without them, None while it is deciding.
    `confidence` and `threshold` are on the same scale (the confidence shown: the
    threshold passed through the same recalibration); a threshold on the raw score is not
    put beside a shown confidence, the words then say it without the numbers."""

    guard: str
    note: str = ""
    escalated: bool | None = None
    escalation_mode: str = ""
    answered_by: str = ""
    confidence: float | None = None
    threshold: float | None = None
    target: float | None = None
    task_type: str = ""
    rule: str | None = None
    rule_author: str | None = None


def _on(task_type: str) -> str:
    return f" on {task_type}" if task_type and task_type != "?" else ""


# The note a rule's verdict writes (vicar.proxy.rules): "rule NAME (EFFECT, by AUTHOR)".
_RULE_NOTE = re.compile(r"^rule (\S+) \(\w+, by ([^)]*)\)")


def _rule_name(f: ReasonFacts) -> str:
    name, author = f.rule or "", f.rule_author or ""
    if (said := _RULE_NOTE.match(f.note)) is not None:
        name, author = name or said[1], author or said[2]
    by = f" ({author}'s)" if author and author != "?" else ""
    return f"“{name}”{by}" if name else ""


def _sure(f: ReasonFacts) -> str:
    """'Vicar is 62% sure; it acts alone only from 87% here', with what is known of it
    ("here": the threshold is the rule's over every kind of work, or a target rule's)."""
    c, t = f.confidence, f.threshold
    if c is not None and t is not None:
        # 86.6% against 87.4% must not read "87% sure; from 87%": a decimal then.
        digits = 1 if c < t and round(100 * c) >= round(100 * t) else 0
        return f"Vicar is {_pct(c, digits)} sure; it acts alone only from {_pct(t, digits)} here"
    return "Vicar is not sure enough to act alone here"


def _unproven(f: ReasonFacts) -> str:
    note = f.note
    if note.startswith("target rule "):
        name = note.removeprefix("target rule ").split(":", 1)[0]
        target = f" wrong at most {_pct(f.target)} of the time" if f.target else " within your target"
        return f"Your target rule “{name}” asks Vicar to be{target} on gates like this; it has not proven that yet"
    if note.startswith("target rules unknown"):
        return "Vicar could not read your target rules, so it asks you"
    if note.startswith("no autonomy rule") or note.startswith("no threshold proven"):
        # The pooled rule: over every kind of work, not this gate's alone.
        target = f"wrong at most {_pct(f.target)} of the time" if f.target else "right often enough"
        return f"Vicar has not yet proven on your answers so far that it is {target} when it acts alone"
    if note.startswith("score 0:"):
        return "Vicar has no guess for this gate"
    if note.startswith("autonomy withdrawn"):
        # The drift test took autonomy away (its reason is the note).
        return f"Vicar's recent answers{_on(f.task_type)} missed yours more often than before; it asks you again"
    return _sure(f)


def _escalated(f: ReasonFacts) -> str:
    g = f.guard
    if g == PAUSED:
        return "You paused Vicar here: every gate like this comes to you"
    if g == RULE:
        if f.note.startswith("the rules could not be checked"):
            if ARTIFACT_REFUSED in f.note:  # the rules read the artifact, and Vicar may not read it
                return "Vicar is not allowed to read this gate's artifact: it has no view of it, it is yours to judge"
            return "Vicar could not check your rules, so it asks you"
        said = _RULE_NOTE.match(f.note)
        why = f.note[said.end() :].removeprefix(": ").strip() if said else ""
        if said and said[2] == DEFAULT_AUTHOR:
            what = f"it {why}" if why else "it cannot be undone"
            return f"Vicar always asks you about this, by one of its default rules (“{said[1]}”): {what}"
        name = _rule_name(f)
        if not name:
            return "One of your rules asks you about this"
        return f"Your rule {name} asks you about gates like this" + (f": {why}" if why else "")
    if g == PROXY_ERROR:
        if ARTIFACT_REFUSED in f.note:
            return "Vicar could not read this gate's artifact, so it has no view of it: it is yours to judge"
        return "Vicar could not form a view of this gate (the proxy was unavailable): it is yours to judge"
    if f.escalation_mode == "always":
        return "This gate asks you every time (escalation mode “always”); Vicar only suggests an answer"
    if g == "censor":
        return "It matches something you have corrected again and again, so Vicar never answers it alone"
    if g == "cold_start":
        return f"New kind of work: Vicar has not seen enough of your answers{_on(f.task_type)} yet"
    if g == "unsupported":
        first = f.note.split(" | ", 1)[0].strip()  # a censor's warning may follow
        return first[:1].upper() + first[1:] if first else "Too few of your answers like this one back Vicar's guess"
    if g == "tension":
        return "Your past answers to cases like this disagree with each other"
    if g == "staleness":
        return f"You have not answered gates{_on(f.task_type)} for a long time; Vicar will not lean on old answers"
    if g == "unproven":
        return _unproven(f)
    if g == "probation":
        return "The agent that made this is new: you have answered too few of its artifacts yet"
    if g == "untrusted":
        return "You correct the work of the agent that made this too often for Vicar to answer for it"
    if g == "audit":
        sure = _sure(f).replace("it acts alone only from", "it may act alone from")
        return f"A spot check: {sure}, but it asks you now and then to keep itself honest"
    if g == PASSTHROUGH:
        if not f.escalation_mode:  # not known here (a listing): either may have sent it
            return "No guard stopped Vicar; the gate asks you (its escalation mode, or no clear answer)"
        return "Vicar had no clear answer to suggest, so it asks you"
    return ""


def _answered(f: ReasonFacts) -> str:
    if f.answered_by == "rule" or f.guard == RULE:
        name = _rule_name(f)
        return f"Your rule {name} answered this gate" if name else "One of your rules answered this gate"
    if f.escalation_mode == "never":
        return "This gate never asks you (escalation mode “never”): Vicar answered with its best guess"
    if f.guard == PASSTHROUGH:
        if f.confidence is not None and f.threshold is not None:
            return f"Vicar answered alone: it is {_pct(f.confidence)} sure and acts alone from {_pct(f.threshold)} here"
        return "Vicar answered alone: the autonomy rule allowed it"
    return ""


def reason_words(f: ReasonFacts) -> str:
    """The sentence for a reviewer ("" where there is nothing to say yet, e.g. a gate that
    has not been consulted). A gate that went to the person says why it came to them; one
    answered without them says who answered and why that was allowed."""
    if not f.guard and f.escalation_mode != "always":
        return ""
    if f.escalated is False:
        return _answered(f)
    if f.escalated is None and f.guard == PASSTHROUGH and f.escalation_mode != "always":
        return _answered(f)
    return _escalated(f)


def details_reason(d: GateDetails, escalation_mode: str = "") -> str:
    """A waiting gate's reason from its details (the `details` query, or the memo a
    listing reads: `vicar escalations`, the inbox's cards), the escalation mode its own
    unless given (gates started before it was kept have none)."""
    return reason_words(
        ReasonFacts(
            guard=d.calibration_guard,
            note=d.calibration_note,
            escalated=True,
            escalation_mode=escalation_mode or (d.escalation_mode.value if d.escalation_mode else ""),
            confidence=d.proxy_confidence,
            threshold=d.autonomy_threshold,
            target=d.autonomy_target,
            task_type=d.task_type,
        )
    )
