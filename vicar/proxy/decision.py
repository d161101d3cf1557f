"""The gate's decision rule. Pure and light: the gate workflow imports it."""

from __future__ import annotations

from pydantic import BaseModel

from vicar.models import (
    SURPRISE_DELTA,
    Action,
    Calibration,
    EscalationMode,
    GateRequest,
    PassResult,
)


class Decision(BaseModel):
    escalate: bool
    action: Action | None
    text: str


def surprised(prior: PassResult, posterior: PassResult) -> bool:
    return abs(posterior.confidence - prior.confidence) > SURPRISE_DELTA


def decide(request: GateRequest, calibration: Calibration, posterior: PassResult, overruled: bool = False) -> Decision:
    """The design's decision flow: the proxy answers alone only where calibration says
    it may (the autonomy rule proved its score and no guard fired). A prediction without
    an action (unparsable or empty) never auto-approves unless the gate is in `never` mode.
    `overruled`: a pause or an `ask` rule of the human's is in force: the human decides,
    whatever the gate's escalation mode (vicar/models/control.py)."""
    text = posterior.prose.strip()
    if overruled:
        return Decision(escalate=True, action=posterior.action, text=text)
    if request.escalation_mode is EscalationMode.always:
        return Decision(escalate=True, action=posterior.action, text=text)
    if request.escalation_mode is EscalationMode.never:
        if not text or posterior.action is None:
            return Decision(escalate=False, action=posterior.action or Action.approve, text=text or "Approved.")
        return Decision(escalate=False, action=posterior.action, text=text)
    if calibration.autonomous and posterior.action is not None and text:
        return Decision(escalate=False, action=posterior.action, text=text)
    return Decision(escalate=True, action=posterior.action, text=text)
