"""Post-hoc calibration of the proxy's confidence: the guards, in order, then the
autonomy rule; and what they read (`calibration_inputs`).

A `block` censor (vicar.proxy.censors) that fired on the artifact withholds the answer
first. The memory guards (cold start, tension, staleness) cap the confidence: they doubt the
memory the score rests on. Then the autonomy rule (vicar.proxy.autonomy): `unproven`
when no threshold is proven or the score is below it, `probation` while the gate's
upstream agent has too few human answers, `untrusted` while its trust score is below
the floor (docs/design/agent-trust-memory.md), `audit` for the share
of the rest still sent to the human. Those leave the score as it is: they do not doubt
it, they withhold the action. The first guard that fires is recorded as the reason
and every one that would fire is listed. `calibrate` is pure; the activities and the
replay evaluation call the same functions.
"""

from __future__ import annotations

from datetime import datetime

from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AutonomyRule, Calibration, CalibrationInputs, CensorHit, GateRequest, RetrievalContext
from vicar.proxy.autonomy import gate_rule
from vicar.proxy.conflicts import tension
from vicar.proxy.outcome_log import last_human_at
from vicar.proxy.recalibration import confidence_map, shown
from vicar.proxy.support import support_of
from vicar.settings import CalibrationParams

GUARDS = (
    "censor",
    "cold_start",
    "tension",
    "staleness",
    "unsupported",
    "unproven",
    "probation",
    "untrusted",
    "audit",
)
CAPPING = frozenset(GUARDS[1:4])


def rule_note(rule: AutonomyRule) -> str:
    team = rule.scope.removeprefix("team ") if rule.scope.startswith("team ") else ""
    return f"bound {rule.bound:.3f} over {rule.evidence} answers" + (f" pooled over your team {team}" if team else "")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if 0.01 <= x <= 0.99 else f"{100 * x:.1f}%"


def _reasons(confidence: float, inp: CalibrationInputs, p: CalibrationParams) -> list[tuple[str, str]]:
    """The guards that fire, with their notes. The rule compares the predictor's score with
    its threshold; the notes say both on the scale the person reads (the confidence shown,
    vicar.proxy.recalibration), one number for the threshold everywhere."""
    fired: list[tuple[str, str]] = []
    seen = confidence_on_scale(inp.confidence_map)
    blocks = [h for h in inp.censors if h.action == "block"]
    if blocks:
        fired.append(("censor", "; ".join(censor_note(h) for h in blocks)))
    if inp.memory_depth < p.memory_depth_threshold:
        fired.append(("cold_start", f"memory depth {inp.memory_depth} < {p.memory_depth_threshold}"))
    if inp.tension:
        fired.append(("tension", inp.tension))
    # Like the design's proxy_accuracy.last_updated: a context with no human answer yet
    # is not stale (cold start is the first guard's business).
    if inp.now is not None and inp.last_human_at is not None:
        age_days = (inp.now - inp.last_human_at).total_seconds() / 86400
        if age_days > p.staleness_days:
            fired.append(("staleness", f"last human answer {age_days:.1f} days ago > {p.staleness_days:g}"))
    if inp.support is not None and not inp.support.supported:
        fired.append(("unsupported", inp.support.words))
    rule = inp.rule
    probation = None
    if inp.agent is not None and inp.agent_human_answers < p.probation_answers:
        probation = (
            "probation",
            f"upstream agent {inp.agent!r} on probation: the human has answered "
            f"{inp.agent_human_answers} of its artifacts < {p.probation_answers}",
        )
    untrusted = None
    if inp.agent is not None and inp.agent_trust is not None and inp.agent_trust < p.trust_floor:
        untrusted = (
            "untrusted",
            f"upstream agent {inp.agent!r} untrusted: trust {inp.agent_trust:.2f} < floor {p.trust_floor:g}",
        )
    if rule is None:
        fired.append(("unproven", "no autonomy rule: nothing proven"))
    elif rule.withdrawn:
        fired.append(("unproven", rule.withdrawn))
    elif rule.threshold is None:
        fired.append(("unproven", f"no threshold proven: {rule_note(rule)} > target {rule.target:g}"))
    elif confidence <= 0.0:
        # No confidence (an unparsable reply, no evidence) is never a proven score, even
        # where the pairs would prove a threshold of 0.
        fired.append(("unproven", f"score 0: no guess to act on (acts alone from {seen(rule.threshold)})"))
    elif confidence < rule.threshold:
        fired.append(
            (
                "unproven",
                f"{seen(confidence)} sure < {seen(rule.threshold)} needed to act alone "
                f"({rule_note(rule)}, target {rule.target:g})",
            )
        )
    elif probation:
        fired.append(probation)
    elif untrusted:
        fired.append(untrusted)
    elif inp.audit_draw < rule.audit_share:
        fired.append(
            (
                "audit",
                f"audited (draw {inp.audit_draw:.3f} < share {rule.audit_share:g}); "
                f"acts alone from {seen(rule.threshold)}, {rule_note(rule)}",
            )
        )
    for withheld in (probation, untrusted):
        if withheld and withheld not in fired:
            fired.append(withheld)  # withheld already (unproven); listed all the same
    return fired


def confidence_on_scale(fitted: tuple[float, float] | None):
    """A score (or the rule's threshold) as the percentage the person reads."""
    return lambda x: _pct(shown(x, fitted))


def censor_note(hit: CensorHit) -> str:
    return f"censor {hit.censor_id} ({hit.action}, similarity {hit.similarity:.2f}): {hit.reason}"


def calibration_inputs(
    memory: PrincipalMemory,
    request: GateRequest,
    ctx: RetrievalContext,
    params: CalibrationParams,
    *,
    now: datetime | None,
    gate_key: str,
    action: Action | None = None,
    artifact: str | None = None,
) -> CalibrationInputs:
    """Everything the guards read: memory depth, tension among the retrieved memories,
    the context's last human answer, the autonomy rule in force (once per consult) with
    the gate's audit draw, the upstream agent's record and the censors that fired on the
    artifact, and whether the person's own answers of the gate's kind back `action` (the
    proposed answer; `artifact`: the whole artifact, default the request's text).
    `gate_key` (the gate's workflow id) also names the gate that announces a withdrawal
    of the context's autonomy."""
    autonomy = gate_rule(
        memory.store,
        memory.dir,
        params.autonomy,
        request.principal,
        request.kind.value,
        request.state.value,
        request.task_type,
        gate_key,
        request=request,  # for the person's target rules that match it
    )
    return CalibrationInputs(
        memory_depth=ctx.memory_depth,
        tension=tension(memory, ctx, params),
        last_human_at=last_human_at(memory.store, request.state.value, request.task_type, request.kind),
        now=now,
        rule=autonomy.rule,
        audit_draw=autonomy.draw,
        withdrawn_news=autonomy.news,
        agent=request.upstream_agent or None,
        agent_human_answers=(
            memory.store.human_answers_from(request.upstream_agent, params.probation_answers)
            if request.upstream_agent
            else 0
        ),
        agent_trust=ctx.agent_trust,
        censors=ctx.censors,
        confidence_map=confidence_map(memory.store, request.kind.value, params.recalibration_window),
        support=(
            support_of(memory, request, ctx.n, request.artifact_text if artifact is None else artifact, action, params)
            if params.support_answers > 0
            else None
        ),
    )


def calibrate(confidence: float, inp: CalibrationInputs, params: CalibrationParams) -> Calibration:
    fired = _reasons(confidence, inp, params)
    rule = inp.rule
    support = inp.support
    numbers: dict = dict(
        censors=[h.censor_id for h in inp.censors],
        score=confidence,
        withdrawn_news=inp.withdrawn_news,
        supported=support.supported if support else None,
        support=support.words if support else "",
        support_label=support.label if support else "",
    )
    # The guards and the rule judge the score; the human is shown it as a probability.
    confidence = shown(confidence, inp.confidence_map)
    if rule:
        numbers |= dict(
            threshold=rule.threshold,
            bound=rule.bound,
            evidence=rule.evidence,
            errors=rule.errors,
            target=rule.target,
            audit_share=rule.audit_share,
            threshold_shown=shown(rule.threshold, inp.confidence_map) if rule.threshold is not None else None,
        )
    # A warning withholds nothing: its reason goes with the note, whoever answers.
    warns = "".join(f" | {censor_note(h)}" for h in inp.censors if h.action == "warn")
    if not fired:
        assert rule is not None  # without a rule, "unproven" fires
        return Calibration(
            confidence=confidence,
            guard="passthrough",
            autonomous=True,
            note=f"acts alone from {_pct(numbers['threshold_shown'])} ({rule_note(rule)}){warns}",
            **numbers,
        )
    guard, note = fired[0]
    capped = min(confidence, params.cap) if any(g in CAPPING for g, _ in fired) else confidence
    return Calibration(confidence=capped, guard=guard, note=note + warns, fired=[g for g, _ in fired], **numbers)
