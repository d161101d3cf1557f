"""The gate obeys the human's rules and pauses (vicar/models/control.py), handed over with
its turn: a pause or an `ask` rule makes the gate ask the human whatever its escalation
mode, the reason shown where escalation reasons are; an `approve`/`reject` rule answers
for the human, recorded as answered by the rule and its author (never the proxy's
evidence). A mixin of GateWorkflow, used by its consult (workflows/gate_consult.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import Action, AnsweredBy, Calibration, GateRequest, PassResult
    from vicar.models.control import Verdict
    from vicar.proxy.decision import Decision
    from vicar.workflows.failures import cause_message as _cause

from vicar.workflows.gate_state import GateState

# Matching reads the artifact's files at most: a few quick attempts, then the gate asks
# the human (a rule is never skipped because it could not be checked).
MATCH: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=1),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=4
    ),
)


class GateControl(GateState):
    _verdict: Verdict | None = None  # what the human's control said of this gate (None: nothing)

    def _show(self, consulted: c.ConsultResult) -> None:
        raise NotImplementedError  # GateConsult._show

    async def _obey(self, req: GateRequest) -> tuple[c.ConsultResult, Decision] | None:
        """The verdict of the principal's control on this gate (kept for _overruled and
        _answerer); the rule's answer when an answer rule decides it, else None."""
        self._verdict = None
        control = self._control
        if control is None or control.empty() or not workflow.patched(c.HUMAN_CONTROL):
            return None
        pause = control.pause_for(req.state, req.task_type)
        if pause is not None:
            self._verdict = Verdict(escalate=True, reason=pause.reason(), guard="paused")
            return None
        if not control.rules:
            return None
        try:
            self._verdict = await self._step(
                c.MATCH_RULES, c.RulesInput(request=req, control=control), Optional[Verdict], MATCH
            )
        except (ActivityError, ApplicationError) as exc:
            self._verdict = Verdict(
                escalate=True, reason=f"the rules could not be checked: {_cause(exc)}", guard="rule"
            )
        v = self._verdict
        if v is None or v.escalate or v.rule is None:
            return None
        rule = v.rule
        action = Action(rule.effect.value)
        none = PassResult(prose="", note=v.reason, confidence=0.0)
        consulted = c.ConsultResult(
            prior=none,
            posterior=none,
            calibration=Calibration(
                confidence=0.0, guard=v.guard, note=v.reason, fired=[v.guard], rule=rule.name, rule_author=rule.author
            ),
        )
        self._show(consulted)
        text = rule.text or f"{action.value.capitalize()}d by {rule.author or 'the principal'}'s rule {rule.name}."
        return consulted, Decision(escalate=False, action=action, text=text)

    def _overruled(self, consulted: c.ConsultResult) -> c.ConsultResult:
        """The consult as the human's control leaves it: a pause or an ask rule replaces
        the guard that decided, with its reason (the proxy's guess stays, for the human)."""
        v = self._verdict
        if v is None or not v.escalate:
            return consulted
        cal = consulted.calibration.model_copy(
            update={
                "guard": v.guard,
                "note": v.reason,
                "autonomous": False,
                "fired": [v.guard, *consulted.calibration.fired],
                "rule": v.rule.name if v.rule else None,
                "rule_author": v.rule.author if v.rule else None,
            }
        )
        return consulted.model_copy(update={"calibration": cal})

    def _forced(self) -> bool:
        return self._verdict is not None and self._verdict.escalate

    def _answerer(self) -> tuple[AnsweredBy, str | None]:
        """Who answered a gate nobody escalated: a rule (and its author), or the proxy."""
        v = self._verdict
        if v is not None and not v.escalate and v.rule is not None:
            return AnsweredBy.rule, v.rule.author or None
        return AnsweredBy.proxy, None
