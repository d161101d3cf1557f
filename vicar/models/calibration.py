"""What the proxy's calibration reads and says of one gate: the censors that fired, the
autonomy rule in force, whether the person's own answers back the guess (support), and
the calibration itself. Re-exported by vicar.models."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class CensorHit(BaseModel):
    """A censor that fired on this gate (vicar.proxy.censors)."""

    censor_id: str
    action: Literal["warn", "block"]
    reason: str
    pattern: str = ""
    similarity: float


class AutonomyRule(BaseModel):
    """What the principal's (score, right?) pairs prove (vicar.proxy.autonomy)."""

    threshold: float | None = None  # the lowest proven score threshold; None: none proven
    threshold_shown: float | None = None  # the same on the confidence's scale, where a reader set it
    scope: str = ""  # whose evidence: "" the principal's own gates, "team NAME" pooled over their team's
    bound: float = 1.0  # upper bound on the error at the threshold (over all the evidence when none)
    evidence: int = 0  # human-answered gates behind the bound
    errors: int = 0  # of those, the ones the proxy would have got wrong
    target: float  # the error the bound must stay within
    delta: float  # the bound holds with probability 1 - delta
    audit_share: float  # of the gates the rule lets through, the share still sent to the human
    withdrawn: str = ""  # the drift test withdrew autonomy from the gate's context: why (no threshold then)
    withdrawn_seq: int = 0  # which withdrawal (the label that showed the drift), so it is announced once


class Support(BaseModel):
    """Whether the person's own answers of a gate's kind of action back the proxy's
    proposed answer (vicar.proxy.support): without it the proxy never answers alone."""

    supported: bool
    words: str  # why, for the person: "a kind of action you have not answered before: “rm” (bash)"
    kind: str = ""  # the kind, in words
    answers: int = 0  # the person's answers of the kind close to this gate (since their last "wrong" on it)
    agreeing: int = 0
    contrary: int = 0
    needed: int = 0
    nearest: float | None = None  # the closest of those answers' similarity to this gate
    new: bool = False  # nothing (or too little) of this kind answered yet
    marked_wrong: bool = False  # the person said "wrong" on this kind and has not re-earned it
    asked_first: bool = False  # the person answered a gate of this kind with "ask me first"
    no_guess: bool = False  # the proxy proposed no answer: there is nothing to back
    label: str = ""  # what to show instead of a percentage ("" where the answers back the guess)


class CalibrationInputs(BaseModel):
    """What the guards look at besides the confidence."""

    memory_depth: int = 0
    tension: str = ""  # a genuine unresolved tension among the retrieved memories, described
    last_human_at: datetime | None = None  # the latest human answer in this state and task type
    now: datetime | None = None  # workflow time; None: no clock (replay), staleness not judged
    rule: AutonomyRule | None = None  # None: nothing proven
    audit_draw: float = 1.0  # uniform in [0, 1), fixed per gate
    # The gate's upstream agent and how many of its artifacts the human has answered
    # (counted up to the probation bound); None: the gate names no agent.
    agent: str | None = None
    agent_human_answers: int = 0
    agent_trust: float | None = None
    censors: list[CensorHit] = Field(default_factory=list)
    # The principal's recalibration (vicar.proxy.recalibration): slope and intercept on the
    # score's log-odds for the confidence shown; None: the score is shown as it is.
    confidence_map: tuple[float, float] | None = None
    # The context's autonomy was withdrawn and this gate is the one to announce it: why.
    withdrawn_news: str = ""
    support: Support | None = None  # None: not judged (support off)


class Calibration(BaseModel):
    confidence: float  # shown to the human: the score recalibrated, capped by the memory guards
    score: float | None = None  # the predictor's score, which the autonomy rule's threshold is on
    guard: str  # the first guard that fired: "cold_start", "tension", ..., or "passthrough"
    note: str = ""
    fired: list[str] = Field(default_factory=list)  # every guard that would fire, in order
    autonomous: bool = False  # the proxy may answer alone (no guard fired)
    threshold: float | None = None  # the autonomy rule's numbers (AutonomyRule)
    threshold_shown: float | None = None  # the threshold on the confidence's scale: "62% sure; alone from 87%"
    bound: float | None = None
    evidence: int = 0
    errors: int = 0
    target: float | None = None
    audit_share: float | None = None  # the rule's audit probability (an audit's pair weighs its inverse)
    censors: list[str] = Field(default_factory=list)  # ids of the censors that fired (block or warn)
    rule: str | None = None  # the human's rule that made the gate ask, or answered it (its name)
    rule_author: str | None = None
    # The context's autonomy was withdrawn and this gate is the first to see it: why (the
    # gate announces it to the webhook, event autonomy_withdrawn).
    withdrawn_news: str = ""
    # Whether the person's own answers of this kind of action back the proposed answer
    # (vicar.proxy.support); None: not judged (a rule decided, the proxy could not run).
    supported: bool | None = None
    support: str = ""  # the words of it
    # Where unsupported, what to show instead of a percentage: "new kind of action", "your
    # answers differ here", "you asked to be asked" (vicar.models.sure).
    support_label: str = ""
