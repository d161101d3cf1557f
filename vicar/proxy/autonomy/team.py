"""The autonomy rule pooled over a team: a bound the team's evidence can reach, for a person
whose own answers cannot prove one yet.

The same bets as the person's own rule (BettingLedger: one bet per threshold, fixed
sequences, audits weighted by the inverse of their probability), over the draws every
member's gates left in the team's store (vicar.proxy.team_store: scores and right/wrong
only), in the order they came: valid whenever read, for the error of the proposals scoring
at or above the threshold, pooled over the team's gates. A person's error can sit above
the target inside a team's that holds, so each person keeps a test of their own: over
their own labelled answers scoring at or above the team's threshold, a bet against "my
error is at most the target" (DriftTest, the drift test's bet); its wealth reaching 1/delta
shows their error above target, and the team's threshold no longer answers for them. Their
own rule, once it proves a threshold, is the one that holds.

Every statement names its scope ("pooled over your team's answers").
"""

from __future__ import annotations

import threading
from pathlib import Path

from vicar.memory.store import RecordStore
from vicar.models import AutonomyRule
from vicar.proxy.autonomy.bets import BettingLedger, DriftTest
from vicar.proxy.autonomy.ledger import autonomy_pairs
from vicar.proxy.team_store import team_draws, team_of

TEAM_SCOPE = "team"


class TeamLedger(BettingLedger):
    def __init__(self, target: float, delta: float, weighted: bool) -> None:
        super().__init__(target, delta)
        self.weighted = weighted
        self.last_seq = 0

    def update(self, data_dir: Path, team: str) -> None:
        draws = team_draws(data_dir, team, self.last_seq)
        for d in draws:
            self.last_seq = d.seq
            if d.labelled:
                self.add(d.score, d.wrong, d.weight if self.weighted else 1.0)
            elif self.weighted:
                self.add(d.score, False, d.weight, labelled=False)


_ledgers: dict[tuple, TeamLedger] = {}
_lock = threading.Lock()


def own_error_above(store: RecordStore, kind: str, threshold: float, target: float, delta: float) -> tuple[int, int]:
    """(labelled answers, wrong) of the person's own proposals scoring at or above
    `threshold`, if their own test shows the error above `target`; (0, 0) if it does not."""
    test = DriftTest(target, delta)
    wrong = seen = 0
    for p in autonomy_pairs(store, kind):
        if p.score >= threshold:
            seen += 1
            wrong += int(not p.correct)
            if test.add(not p.correct):
                return seen, wrong
    return 0, 0


def team_rule(
    store: RecordStore,
    principal_dir: Path,
    kind: str,
    target: float,
    delta: float,
    audit_share: float,
    weighted: bool,
) -> AutonomyRule | None:
    """The rule pooled over the principal's team for gates of `kind`, with its scope; None
    where the principal is in no team. Its threshold is withdrawn where the person's own
    answers above it show their error above target."""
    data_dir = principal_dir.parent.parent  # <data dir>/principals/<principal>
    team = team_of(data_dir, principal_dir.name)
    if team is None or kind != "gate":
        return None
    key = (str(data_dir), team, target, delta, weighted)
    with _lock:
        ledger = _ledgers.get(key)
        if ledger is None:
            ledger = _ledgers[key] = TeamLedger(target, delta, weighted)
        ledger.update(data_dir, team)
        rule = ledger.rule(audit_share).model_copy(update={"scope": f"{TEAM_SCOPE} {team}"})
    if rule.threshold is None:
        return rule
    seen, wrong = own_error_above(store, kind, rule.threshold, target, delta)
    if seen:
        why = (
            f"your own answers show your error above target {target:g} where your team's rule would answer "
            f"({wrong} wrong of {seen} at or above its threshold)"
        )
        return rule.model_copy(update={"threshold": None, "withdrawn": why})
    return rule
