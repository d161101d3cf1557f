"""The trust ledger of upstream agents (docs/design/agent-trust-memory.md), per principal.

For each agent whose artifacts reach this human's gates: the human's approvals,
corrections and rejections, the proxy's answers alone, overrides (the human answered
other than the proxy would have) and regret (an approval the proxy gave alone that the
human later reversed on the same lineage). Pure: vicar/proxy/outcome_log.py reads the counts.

The design's score weighs a critic's impact, depth and regret. An upstream agent here is
an author of artifacts, not a critic, so the score is adapted: the human's approval rate
of its work, smoothed toward the design's starting trust of 0.6 as if from five prior
answers, times one minus its regret ratio (regretted / approved alone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel

INITIAL_TRUST = 0.6  # the design's starting trust for a new agent
PRIOR_ANSWERS = 5  # how many answers that start weighs against the agent's record


class AgentTrust(BaseModel):
    agent: str
    approvals: int = 0
    corrections: int = 0
    rejections: int = 0
    other: int = 0  # the human's other endings (hold, withdraw, ...)
    alone: int = 0  # answers the proxy gave alone
    approved_alone: int = 0
    overrides: int = 0
    regrets: int = 0

    @property
    def human_answers(self) -> int:
        return self.approvals + self.corrections + self.rejections + self.other

    @property
    def regret_ratio(self) -> float:
        return self.regrets / self.approved_alone if self.approved_alone else 0.0

    @property
    def score(self) -> float:
        approval = (self.approvals + INITIAL_TRUST * PRIOR_ANSWERS) / (self.human_answers + PRIOR_ANSWERS)
        return approval * (1.0 - self.regret_ratio)


_HUMAN_FIELD = {"approve": "approvals", "correct": "corrections", "reject": "rejections"}


def ledger(gates: Sequence[tuple[str, str, str, int]], wrong: Sequence[tuple[str, bool, int]]) -> list[AgentTrust]:
    """From `vicar.proxy.outcome_log.ledger_rows`; the least trusted first."""
    by: dict[str, AgentTrust] = defaultdict(lambda: AgentTrust(agent=""))
    for agent, answered_by, outcome, count in gates:
        t = by[agent]
        if answered_by == "human":
            name = _HUMAN_FIELD.get(outcome, "other")
            setattr(t, name, getattr(t, name) + count)
        else:
            t.alone += count
            if outcome == "approve":
                t.approved_alone += count
    for agent, regret, count in wrong:
        t = by[agent]
        if regret:
            t.regrets += count
        else:
            t.overrides += count
    out = [t.model_copy(update={"agent": a}) for a, t in by.items()]
    return sorted(out, key=lambda t: (t.score, t.agent))
