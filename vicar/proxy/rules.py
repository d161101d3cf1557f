"""Matching the human's rules against one gate (the models and their changes are
vicar/models/control.py). Pure: the rule-matching activity and `vicar rules test` call it.

Precedence, safest first: a pause in scope wins over everything (nothing answers
alone, rules included); then any matching `ask` rule of the person's (the first one
names the reason); then Vicar's default rules, which ask about what cannot be undone,
unless the person's own first matching answer rule rejects (a reject is as safe as
asking, and theirs); then the first matching answer rule (`approve`/`reject`) in the
order the rules were added.
An answer rule on a question (which has no approve/reject) asks.
"""

from __future__ import annotations

import fnmatch

from vicar.models import GateRequest, RequestKind
from vicar.models.control import Control, Effect, Rule, Verdict, compile_regex, word_regex
from vicar.models.default_rules import is_default


def _texts(rule: Rule, request: GateRequest, artifact: str) -> list[str]:
    return {
        "artifact": [artifact],
        "question": [request.question],
        "both": [artifact, request.question],
    }[rule.text_in]


def matches(rule: Rule, request: GateRequest, artifact: str, lineage: str | None) -> bool:
    """Whether every condition of the rule holds for this request. `artifact`: the whole
    artifact the gate reviews (its text and its paths' contents)."""
    if rule.states and request.state not in rule.states:
        return False
    if rule.task_types and request.task_type not in rule.task_types:
        return False
    if rule.upstream_agents and request.upstream_agent not in rule.upstream_agents:
        return False
    if rule.lineages and lineage not in rule.lineages:
        return False
    if rule.paths and not any(fnmatch.fnmatchcase(p, g) for p in request.artifact_paths for g in rule.paths):
        return False
    texts = _texts(rule, request, artifact)
    if rule.words and not any(word_regex(w).search(t) for w in rule.words for t in texts):
        return False
    if rule.regex and not any(compile_regex(rule.regex).search(t) for t in texts):
        return False
    return True


def verdict(control: Control, request: GateRequest, artifact: str, lineage: str | None) -> Verdict | None:
    """The precedence in the module's docstring."""
    pause = control.pause_for(request.state, request.task_type)
    if pause is not None:
        return Verdict(escalate=True, reason=pause.reason(), guard="paused")
    # A target rule never decides a gate: it tightens the autonomy rule (proxy/autonomy/targets.py).
    hits = [r for r in control.in_force() if r.effect is not Effect.target and matches(r, request, artifact, lineage)]
    if not hits:
        return None
    defaults = {r.name for r in hits if is_default(r.name)}
    asks = [r for r in hits if r.effect is Effect.ask or request.kind is not RequestKind.gate]
    own_asks = [r for r in asks if r.name not in defaults]
    answer = next((r for r in hits if r.effect is not Effect.ask and r.name not in defaults), None)
    if own_asks:
        return Verdict(escalate=True, reason=_reason(own_asks[0]), guard="rule", rule=own_asks[0])
    if asks and not (answer is not None and answer.effect is Effect.reject):
        # Vicar's default asks win over an approve, never over the person's own reject.
        return Verdict(escalate=True, reason=_reason(asks[0]), guard="rule", rule=asks[0])
    assert answer is not None
    return Verdict(reason=_reason(answer), guard="rule", rule=answer)


def _reason(r: Rule) -> str:
    """ "rule NAME (EFFECT, by AUTHOR)", and why where the rule says (the default rules do)."""
    return f"rule {r.name} ({r.effect.value}, by {r.author or '?'})" + (f": {r.why}" if r.why else "")


def needs_artifact(control: Control) -> bool:
    """Whether any rule reads the artifact's text (else its files need not be read)."""
    return any((r.words or r.regex) and r.text_in != "question" for r in control.in_force())
