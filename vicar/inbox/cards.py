"""What a card says before anyone taps, so no one-tap approve is a blind one: why the gate came to
the person (the words vicar.proxy.reasons makes, the one place they are made), a risk
flag where one of their rules matched (its words marked in the excerpt), whether the
artifact could be shown, the proxy's confidence in plain words, and whether a one-tap
approve is allowed at all. Read from what the list has (the memo each gate writes when
it escalates) or from a gate's full view; the server checks the same facts before it
takes a one-tap or batch approve, whatever the form says."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vicar.client.gates import UNREADABLE
from vicar.errors import ARTIFACT_REFUSED
from vicar.models.control import Control, Rule, compile_regex, word_regex
from vicar.models.plain import plain_text
from vicar.models.sure import confidence_words, gate_confidence_words
from vicar.proxy.concerns import fitting_words
from vicar.proxy.reasons import PROXY_ERROR, RULE, ReasonFacts, reason_words

# The note a rule's verdict writes (vicar.proxy.rules): "rule NAME (EFFECT, by AUTHOR)".
RULE_NOTE = re.compile(r"^rule (\S+) \(")
REFUSED = f"{ARTIFACT_REFUSED}: "
# Guards whose gate is never approved from the list: the person's rule asked about it, the
# proxy could not run (a refused or unreadable artifact among the causes), or a block
# censor withheld the proxy's answer.
OPEN_FIRST = {
    RULE: "your rule asked about it",
    PROXY_ERROR: "the proxy could not run on it",
    "censor": "a censor flagged it",
}


@dataclass
class Card:
    why: str  # plain words: why it came to the person
    numbers: str  # the guard and its note, behind a <details>
    shown: bool  # the artifact (or its start) is on the card
    shown_words: str
    sure: str  # "83% sure; acts alone from 87%"
    risk: str = ""  # the rule that matched, in words
    excerpt: list[tuple[str, bool]] = field(default_factory=list)  # the excerpt, its matched words marked
    open_first: str = ""  # why there is no one-tap approve ("" : there is)
    words: str = ""  # the proxy's words as shown: none that turn against its action

    @property
    def one_tap(self) -> bool:
        return not self.open_first


def pct(x: float) -> str:
    return f"{round(100 * x)}%"


def sure_words(confidence: float | None, threshold: float | None, d: Any = None) -> str:
    """The confidence in the words every surface shows (vicar.models.sure): `d` the
    gate's details or view, for whether there is a guess and whether it is backed."""
    return confidence_words(confidence, threshold) if d is None else gate_confidence_words(d, threshold)


def rule_named(note: str, control: Control | None) -> Rule | None:
    m = RULE_NOTE.match(note)
    if m is None:
        return None
    return (control or Control()).rule_named(m[1])  # Vicar's default rules too


def marked(text: str, rule: Rule | None) -> list[tuple[str, bool]]:
    """`text` in pieces, True where the rule's words or regex match (what made it ask)."""
    if rule is None or not text:
        return [(text, False)] if text else []
    spans: list[tuple[int, int]] = []
    patterns = [word_regex(w) for w in rule.words if w.split()]
    if rule.regex:
        try:
            patterns.append(compile_regex(rule.regex))
        except ValueError:
            pass  # the brain took it, so it compiles; a change of RE2 must not take the list down
    for p in patterns:
        spans += [(m.start(), m.end()) for m in p.finditer(text) if m.end() > m.start()]
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at:
            start = at
        if end <= start:
            continue
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


def _refusal(note: str) -> str:
    return note.partition(REFUSED)[2] if REFUSED in note else ""


# "artifact path '/etc/hostname' is outside the artifact roots; add ... (VICAR_...)": the
# path is the reviewer's; the rest (settings, how to allow it) is the operator's, behind
# "the numbers".
_REFUSED_PATH = re.compile(r"^artifact path ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


def refused_words(refusal: str) -> str:
    """A refused artifact file in a reviewer's words."""
    m = _REFUSED_PATH.match(refusal)
    return f"Vicar is not allowed to read {m[1]}" if m else "Vicar is not allowed to read its file"


def shown_words(action: Any, text: str, artifact: str = "") -> str:
    """The proxy's words as a card shows them: without a sentence that turns against the
    action shown beside them (vicar.proxy.concerns; gates escalated before the proxy
    itself left them out still carry such words), and none without an action (the text
    is then the proxy's remark on why it has no guess, in its own terms)."""
    verb = getattr(action, "value", action) or ""
    return fitting_words(verb, text, artifact) if verb else ""


def card(
    d: Any,
    control: Control | None,
    *,
    describe: Any = None,
    escalation_mode: str = "",
    excerpt: str | None = None,
    on_page: bool = False,
) -> Card:
    """The card of one waiting gate: `d` a GateDetails (or a GateView, which carries the
    same fields), `control` the principal's rules (to name and mark what matched);
    `on_page`: the gate's own page, where the whole artifact is shown below."""
    guard, note = d.calibration_guard or "", d.calibration_note or ""
    escalation_mode = escalation_mode or getattr(d, "escalation_mode", "") or ""
    text = d.artifact_excerpt if excerpt is None else excerpt
    threshold = getattr(d, "autonomy_threshold", None)
    facts = ReasonFacts(
        guard=guard,
        note=note,
        escalated=True,
        escalation_mode=escalation_mode,
        confidence=d.proxy_confidence,
        threshold=threshold,
        target=getattr(d, "autonomy_target", None),
        task_type=d.task_type if isinstance(d.task_type, str) else "",
    )
    why = plain_text(getattr(d, "reason_words", "") or reason_words(facts))
    numbers = f"guard {guard}: {note}" if guard else note
    refused = _refusal(note)
    unreadable = d.question.startswith(UNREADABLE)
    if refused:
        shown, said = False, f"Artifact could not be shown: {refused_words(refused)}"
    elif unreadable:
        shown, said = False, "Artifact could not be shown: the gate's summary does not open here"
    elif text:
        where = "below" if on_page else "(its start)"
        shown, said = True, f"Artifact shown {where}"
    else:
        shown, said = False, "No artifact on the card"
    named = RULE_NOTE.match(note) if guard == RULE else None  # not "the rules could not be checked"
    rule = rule_named(note, control) if named else None
    pieces = marked(text, rule)
    risk = ""
    if named:
        hits = list(dict.fromkeys(p for p, hit in pieces if hit))
        if hits:
            what = ", ".join(f"“{h}”" for h in hits)
        else:
            what = describe(rule) if rule is not None and describe is not None else "(the rule is no longer in force)"
        risk = f"Your rule “{named[1]}” matched: {what}"
    if not shown:
        open_first = said.lower()
    elif guard in OPEN_FIRST:
        open_first = OPEN_FIRST[guard]
    elif not why:
        open_first = "its reason is not known here"
    else:
        open_first = ""
    return Card(
        why=why or "Not known here (the gate's page has what it says)",
        numbers=numbers,
        shown=shown,
        shown_words=said,
        sure=sure_words(d.proxy_confidence, threshold, d),
        risk=risk,
        excerpt=pieces,
        open_first=open_first,
        words=shown_words(d.proxy_action, d.proxy_text or "", getattr(d, "artifact_text", "") or text),
    )


async def controls_of(client: Any, principals: set[str]) -> dict[str, Control]:
    """The rules of each principal shown (one query each, not one per gate); a principal
    whose rules cannot be read is shown without marks, never an error."""
    from temporalio.service import RPCError

    from vicar.client import get_control
    from vicar.errors import VicarError

    out: dict[str, Control] = {}
    for p in sorted(principals):
        try:
            out[p] = await get_control(client, p)
        except (VicarError, RPCError, ValueError):
            continue
    return out
