"""Habits become rules the person accepts: from a run of identical answers on one kind of
action, with no contrary answer, a suggested rule ("allow `git status` (bash)? you
approved it 5 times, never otherwise"). Never applied without the person's tap: the
inbox, `vicar rules suggest` and Slack offer it, and accepting adds it as their own rule
(the brain's `add_rule`), which they can remove like any other.

Only kinds of action a request names (a lineage: the coding-agent hooks' `bash:git
status`, an orchestrator's thread), since a rule matches them by that name; never one a
rule of theirs or of Vicar's asks about (the gates it sent them are their decisions, and
an `ask` rule would win over the suggested answer anyway); never one a rule of theirs
already answers. Pure over the outcome log: the CLI, the inbox and the replay read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel

from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord
from vicar.models.audit import AuditRecord
from vicar.models.control import Control, Effect, Rule
from vicar.proxy.lineage import lineage_of
from vicar.proxy.rules import verdict
from vicar.proxy.support import action_kind, kind_words

MIN_RUN = 5  # identical answers of one kind, none contrary, before a rule is suggested
SUGGESTED = (Action.approve, Action.reject)  # a rule can only answer these
PREFIX = "habit-"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class Suggestion(BaseModel):
    rule: Rule  # the rule accepting it adds
    kind: str  # the kind of action, in words
    answers: int  # the person's identical answers to it
    words: str  # the offer, for the person


class _Kind:
    def __init__(self, request: GateRequest) -> None:
        self.request = request  # the latest gate of the kind
        self.actions: list[Action] = []
        self.ruled = False  # a rule or pause sent one of its gates to the person


def _rule_name(request: GateRequest) -> str:
    slug = _SLUG.sub("-", f"{request.task_type}-{(request.lineage or '').partition(':')[2] or request.lineage}")
    return (PREFIX + slug.strip("-.")).rstrip("-.")[:64] or PREFIX + "kind"


def _offer(kind: str, action: Action, count: int) -> str:
    verb = {"approve": "allow", "reject": "refuse"}[action.value]
    did = {"approve": "approved", "reject": "rejected"}[action.value]
    return f"{verb.capitalize()} {kind} from now on? You {did} it {count} times, never otherwise."


def suggestions(records: Iterable[OutcomeRecord], control: Control | None, min_run: int = MIN_RUN) -> list[Suggestion]:
    """The rules the person's habits suggest, from their outcome records in log order."""
    control = control or Control()
    kinds: dict[str, _Kind] = {}
    for r in records:
        req = r.request
        if r.answered_by is not AnsweredBy.human or not req.lineage:
            continue
        k = kinds.setdefault(action_kind(req), _Kind(req))
        k.request = req
        cal = r.calibration
        if cal is not None and cal.guard in ("rule", "paused"):
            k.ruled = True
            continue
        k.actions.append(r.action)
    taken = {r.name for r in control.rules}
    out = []
    for k in kinds.values():
        actions = k.actions
        if k.ruled or len(actions) < min_run or len(set(actions)) != 1 or actions[0] not in SUGGESTED:
            continue
        req, action = k.request, actions[0]
        v = verdict(control, req, req.artifact_text, lineage_of(req).lineage)
        if v is not None:
            continue  # a pause, or a rule (theirs or Vicar's) already speaks for it
        name = _rule_name(req)
        if name in taken:
            continue
        what = kind_words(req)
        rule = Rule(
            name=name,
            effect=Effect(action.value),
            states=[req.state],
            task_types=[req.task_type],
            lineages=[req.lineage or ""],
            text=f"{'Approved' if action is Action.approve else 'Rejected'} by the person's rule from their habit "
            f"({len(actions)} identical answers to {what}).",
        )
        out.append(Suggestion(rule=rule, kind=what, answers=len(actions), words=_offer(what, action, len(actions))))
    return sorted(out, key=lambda s: -s.answers)


def from_audit(r: AuditRecord) -> OutcomeRecord | None:
    """What `suggestions` reads of an audit record (the inbox reads the trail, not the
    store): the request's kind of action, the answer, who gave it and the guard."""
    if r.answered_by != AnsweredBy.human.value or not r.lineage:
        return None
    try:
        request = GateRequest(
            principal=r.principal,
            gate_id=r.gate_id,
            kind=r.kind,
            state=r.state,
            task_type=r.task_type,
            question=r.question,
            artifact_text=r.artifact_excerpt,
            lineage=r.lineage,
        )
        action = Action(r.action)
    except ValueError:
        return None
    return OutcomeRecord(
        request=request,
        n=r.n,
        workflow_id=r.workflow_id,
        action=action,
        response_text=r.words,
        answered_by=AnsweredBy.human,
        calibration=Calibration(confidence=r.confidence or 0.0, guard=r.guard),
        ask_first=r.ask_first,
    )


def suggestions_from_audit(records: Iterable[AuditRecord], control: Control | None) -> list[Suggestion]:
    return suggestions((o for o in map(from_audit, records) if o is not None), control)
