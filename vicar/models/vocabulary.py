"""The gate's vocabulary: the CfA states, escalation modes, actions (and which a reviewer
may give where), request kinds, who answered and a gate's statuses. Enums only:
importable in the workflow sandbox."""

from __future__ import annotations

from enum import Enum


class CfAState(str, Enum):
    INTENT_ASSERT = "INTENT_ASSERT"
    PLAN_ASSERT = "PLAN_ASSERT"
    WORK_ASSERT = "WORK_ASSERT"


class EscalationMode(str, Enum):
    always = "always"
    when_unsure = "when_unsure"
    never = "never"


class Action(str, Enum):
    approve = "approve"
    correct = "correct"
    reject = "reject"
    hold = "hold"
    withdraw = "withdraw"
    # The human's reply to an agent's question (AskQuestion), not a gate decision.
    answer = "answer"
    # Not an ending: the reviewer asked something or raised a point the agent side must
    # answer before a decision. The gate answers and asks again (bounded).
    dialog = "dialog"


# Actions a reviewer may give at each gate state. `hold` is "not yet: needs more
# review"; `withdraw` abandons the work item.
VALID_ACTIONS: dict[CfAState, tuple[Action, ...]] = {
    state: (Action.approve, Action.correct, Action.reject, Action.hold, Action.withdraw, Action.dialog)
    for state in CfAState
}
TERMINAL_ACTIONS = (Action.approve, Action.correct, Action.reject, Action.hold, Action.withdraw)
QUESTION_ACTIONS = (Action.answer,)


class RequestKind(str, Enum):
    gate = "gate"  # an approval gate: approve / correct / reject / ...
    question = "question"  # an agent's question mid-turn (AskQuestion): the answer is text


class AnsweredBy(str, Enum):
    human = "human"
    proxy = "proxy"
    nobody = "nobody"  # the gate's deadline passed while it waited for the human
    rule = "rule"  # a rule the human wrote (vicar/models/control.py); never the proxy's evidence


class GateStatus(str, Enum):
    queued = "queued"  # waiting for the principal's attention (the brain's turn)
    consulting = "consulting"  # the proxy is predicting
    escalated = "escalated"  # waiting for the human
    done = "done"
    timed_out = "timed_out"  # the deadline passed with no answer
    cancelled = "cancelled"
