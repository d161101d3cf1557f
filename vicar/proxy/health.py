"""Health monitor: the human's approval rate per (state, task type) across sessions.

Observational only, like the EMA: nothing here changes what the proxy decides. A
falling approval rate says the agents' work got worse or the human's bar moved; either
way an operator should look.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from statistics import fmean

from pydantic import BaseModel

from vicar.models import Action, AnsweredBy, AutonomyRule, OutcomeRecord, RequestKind
from vicar.models.control import Control
from vicar.settings import AutonomyParams, CalibrationParams

SESSIONS = 10  # the trend looks at this many latest sessions
MIN_SESSIONS = 4
DROP = 0.3  # a fall in approval rate this large between the window's halves is flagged


class ContextHealth(BaseModel):
    state: str
    task_type: str
    human_answers: int
    sessions: list[str]  # oldest first, the latest SESSIONS
    approval_rates: list[float]  # per session, same order
    earlier: float | None = None  # mean rate over the window's first half
    later: float | None = None
    flagged: bool = False
    ema_approval_rate: float | None = None
    responders: dict[str, int] = {}  # who answered, most answers first ("?": not recorded)


def session_of(record: OutcomeRecord) -> str:
    if record.request.session_id:
        return record.request.session_id
    if record.at is not None:
        return record.at.date().isoformat()
    return f"N{record.n // 50 * 50}"


def context_health(
    records: list[OutcomeRecord], ema: dict[tuple[str, str], float | None] | None = None
) -> list[ContextHealth]:
    """Records in log order; proxy answers are left out (they are not the human)."""
    per: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(dict)
    who: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in records:
        if r.answered_by is not AnsweredBy.human or r.request.kind is not RequestKind.gate:
            continue
        key = (r.request.state.value, r.request.task_type)
        per[key].setdefault(session_of(r), []).append(r.action is Action.approve)
        who[key][r.responder or "?"] += 1
    out = []
    for (state, task_type), sessions in sorted(per.items()):
        names = list(sessions)[-SESSIONS:]  # dicts keep first-seen order: log order
        rates = [fmean(sessions[s]) for s in names]
        h = ContextHealth(
            state=state,
            task_type=task_type,
            human_answers=sum(len(v) for v in sessions.values()),
            sessions=names,
            approval_rates=rates,
            ema_approval_rate=(ema or {}).get((state, task_type)),
            responders=dict(who[(state, task_type)].most_common()),
        )
        if len(rates) >= MIN_SESSIONS:
            half = len(rates) // 2
            h.earlier, h.later = fmean(rates[:half]), fmean(rates[-half:])
            h.flagged = h.earlier - h.later >= DROP
        out.append(h)
    return out


# -- the autonomy rule's state, in words ----------------------------------------------
# One computation and one wording, used by `vicar health` and the demo's footer: before,
# the footer stated the rule the last gate was consulted under (before the last wave's
# answers were graded) in its own words, and the two disagreed.


def autonomy_rules(
    store,
    principal_dir: Path,
    base: AutonomyParams,
    contexts: list[tuple[str, str]],
    recalibration_window: int = CalibrationParams().recalibration_window,
) -> dict[tuple[str, str], AutonomyRule]:
    """The rule each gate context is under now: `rule_in_force`, the very function a
    gate's consult calls, its threshold also on the confidence's scale (the one number
    every surface shows)."""
    from vicar.proxy.autonomy import rule_in_force  # heavy (numpy, the store); the CLI loads it only here
    from vicar.proxy.recalibration import confidence_map, shown

    fitted = confidence_map(store, "gate", recalibration_window)
    rules = {
        (state, task_type): rule_in_force(store, principal_dir, base, state, task_type=task_type)
        for state, task_type in contexts
    }
    return {
        key: r.model_copy(update={"threshold_shown": shown(r.threshold, fitted)}) if r.threshold is not None else r
        for key, r in rules.items()
    }


POOLED = "every state and task type"


def _pct(x: float) -> str:
    return f"{min(max(100 * x, 1), 99):.0f}%"


def rule_statement(rule: AutonomyRule, over: str = POOLED) -> str:
    """What a rule lets the proxy do, and on what evidence (pooled `over` what), in one sentence."""
    if rule.scope.startswith("team "):
        over = f"your team {rule.scope.removeprefix('team ')}'s answers (every member's gates)"
    at = f"at {1 - rule.delta:.0%} confidence"
    if rule.withdrawn:
        return f"none: the proxy answers nothing alone here ({rule.withdrawn})."
    if rule.threshold is None and rule.evidence == 0:
        said = f"none proven: the proxy answers nothing alone (no graded answer yet; target error {rule.target:g})"
    elif rule.threshold is None:
        said = (
            f"none proven: the proxy answers nothing alone (error bound {rule.bound:.3f} > target "
            f"{rule.target:g} {at}, over all {rule.evidence} graded answers pooled over {over}, "
            f"{rule.errors} wrong)"
        )
    else:
        sure = _pct(rule.threshold_shown if rule.threshold_shown is not None else rule.threshold)
        said = (
            f"acts alone from {sure} sure: the proxy may answer alone when it is at least {sure} sure "
            f"(the error of its answers that sure, pooled over {over}: bound {rule.bound:.3f} <= target "
            f"{rule.target:g} {at} whenever read, over the {rule.evidence} graded answers that sure, "
            f"{rule.errors} wrong), and only on a kind of action the person's own answers back"
        )
    if rule.audit_share:
        said += f"; {rule.audit_share:.0%} of those still go to the human (audit)"
    return said + "."


def rule_lines(rules: dict[tuple[str, str], AutonomyRule]) -> list[str]:
    """One line per rule, naming the gate states it holds for: the evidence is pooled over
    every gate, the parameters may differ per state (`autonomy.json`)."""
    states: dict[str, list[str]] = {}
    withdrawn = []
    for (state, task_type), rule in rules.items():
        said = rule_statement(rule)
        if rule.withdrawn:  # the human must see which context lost autonomy
            withdrawn.append(f"Autonomy rule for {state} gates of task type {task_type}: {said}")
        elif state not in states.setdefault(said, []):
            states[said].append(state)
    return [f"Autonomy rule for {' and '.join(names)} gates: {said}" for said, names in states.items()] + withdrawn


def control_lines(principal: str, control: Control | None) -> list[str]:
    """The human's pauses and rules in force, from the brain's durable copy in the store:
    a pause wins over everything the proxy has proven, so it comes first."""
    if control is None:
        return []
    lines = [
        f"Paused by {p.by} at {p.at.strftime('%Y-%m-%d %H:%M:%S UTC') if p.at else '?'} for {p.scope()}: "
        "the proxy answers nothing alone there."
        for p in control.pauses
    ]
    if control.rules:
        lines.append(
            f"Rules in force: {len(control.rules)}, checked before the proxy at every gate "
            f"(vicar rules list {principal})."
        )
    return lines


def known_principals(principals_dir: Path, most: int = 20) -> str:
    """The principals with a memory under `principals_dir`, for a 'no such principal' line."""
    try:
        names = sorted(p.name for p in principals_dir.iterdir() if (p / "memory.db").is_file())
    except OSError:
        names = []
    if not names:
        return "no principal has a memory here yet"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return "principals here: " + ", ".join(names[:most]) + more
