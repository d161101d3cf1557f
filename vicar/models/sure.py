"""How sure the proxy is, in the words every surface shows (the inbox, `vicar gate show`,
Slack and chat notices, the audit export): one scale, and words instead of a percentage
where there is nothing to be sure of. Pure: the models' chat texts and vicar.proxy.reasons
use it. docs/confidence.md."""

from __future__ import annotations


def pct(x: float, digits: int = 0) -> str:
    """A confidence as the person reads it: never 0% or 100%, which no record proves."""
    low, high = 10.0**-digits, 100 - 10.0**-digits
    return f"{min(max(100 * x, low), high):.{digits}f}%"


NO_GUESS, NEW_KIND, ANSWERS_DIFFER, ASKED_FIRST = (
    "no guess yet",
    "new kind of action",
    "your answers differ here",
    "you asked to be asked",
)


def confidence_words(
    confidence: float | None,
    threshold: float | None = None,
    *,
    guess: bool = True,
    supported: bool | None = None,
    support_label: str = "",
    escalation_mode: str = "",
) -> str:
    """The proxy's confidence in the words every surface shows, on one scale: "83% sure;
    acts alone from 87%". Where there is nothing to be sure of it says so instead of a
    percentage: "no guess yet" (no proposed answer), or where the person's own answers do
    not back the guess its `support_label` ("new kind of action", "your answers differ
    here", "you asked to be asked"; vicar.proxy.support). The
    threshold is left out where the gate would ask the person whatever the confidence
    (escalation mode "always"). docs/confidence.md."""
    if confidence is None:
        return ""
    if not guess or confidence <= 0.0:
        return NO_GUESS
    if supported is False:
        return support_label or ANSWERS_DIFFER
    if threshold is None:
        return f"{pct(confidence)} sure"
    if escalation_mode == "always":
        return f"{pct(confidence)} sure; asks you every time"
    # 86.6% against 87.4% must not read "87% sure; from 87%": a decimal then.
    digits = 1 if confidence < threshold and round(100 * confidence) >= round(100 * threshold) else 0
    return f"{pct(confidence, digits)} sure; acts alone from {pct(threshold, digits)}"


def gate_confidence_words(d: object, threshold: float | None = None) -> str:
    """confidence_words for a gate's details or view (anything with their fields): whether
    there is a guess, whether the person's answers back it, the escalation mode.
    `threshold`: the one to show (default the details' own)."""
    mode = getattr(d, "escalation_mode", None)
    return confidence_words(
        getattr(d, "proxy_confidence", None),
        getattr(d, "autonomy_threshold", None) if threshold is None else threshold,
        guess=getattr(d, "proxy_action", None) is not None,
        supported=getattr(d, "proxy_supported", None),
        support_label=str(getattr(d, "proxy_support_label", "") or ""),
        escalation_mode=str(getattr(mode, "value", mode) or ""),
    )
