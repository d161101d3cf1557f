"""The autonomy rule's evidence and its bets over it.

Every gate the rule could have let through gives an observation: a human-answered
gate a pair (the proxy's score for it, whether its would-be answer was right), an
answer alone that was not audited a draw whose label was not taken. The rows are
written with their gate's outcome (vicar.proxy.outcome_log) and read here, in outcome
order, into one bet per threshold (vicar.proxy.autonomy.bets).
"""

from __future__ import annotations

from typing import NamedTuple

from vicar.memory.store import RecordStore
from vicar.proxy.autonomy.bets import BettingLedger


class Evidence(NamedTuple):
    """The autonomy rule's evidence from one human-answered gate."""

    kind: str
    n: int
    score: float  # the posterior's confidence as the predictor gave it
    correct: bool  # whether its action was the human's
    agent: str | None  # the upstream agent whose artifact it was
    audit_p: float | None = None  # an audit: the probability it was drawn with (None: labelled anyway)


class Alone(NamedTuple):
    """A gate the proxy answered alone without an audit: the draw whose label was not
    taken (it could have been audited with probability audit_p)."""

    kind: str
    score: float
    audit_p: float


class Draw(NamedTuple):
    """One observation of the rule's bets, in outcome order: a labelled pair, weighted
    by the inverse of the probability its label was taken, or an unaudited answer
    alone (wrong False, the audit's weight)."""

    outcome_seq: int
    pair_seq: int | None  # the autonomy_pairs row (None: an autonomy_alone row)
    alone_seq: int | None
    score: float
    wrong: bool
    weight: float


class Pair(NamedTuple):
    seq: int  # arrival order of the evidence
    score: float
    correct: bool


def autonomy_pairs(store: RecordStore, kind: str, after_seq: int = 0, limit: int | None = None) -> list[Pair]:
    """One kind's pairs after `after_seq`: the newest `limit`, oldest first."""
    sql = "SELECT seq, score, correct FROM autonomy_pairs WHERE kind = ? AND seq > ? ORDER BY seq DESC"
    params: list = [kind, after_seq]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    with store.reading() as db:
        rows = db.execute(sql, params).fetchall()
    return [Pair(seq, score, bool(ok)) for seq, score, ok in reversed(rows)]


def rule_draws(store: RecordStore, kind: str, after_pair: int = 0, after_alone: int = 0) -> list[Draw]:
    """One kind's draws after the given rows, in outcome order (each outcome commits its
    rows in one transaction, so two reads in a row see a consistent prefix)."""
    with store.reading() as db:
        pairs = db.execute(
            "SELECT seq, outcome_seq, score, correct, audit_p FROM autonomy_pairs WHERE kind = ? AND seq > ?",
            (kind, after_pair),
        ).fetchall()
        alone = db.execute(
            "SELECT seq, outcome_seq, score, audit_p FROM autonomy_alone WHERE kind = ? AND seq > ?",
            (kind, after_alone),
        ).fetchall()
    draws = [Draw(o, seq, None, score, not ok, 1.0 / p if p else 1.0) for seq, o, score, ok, p in pairs]
    draws += [Draw(o, None, seq, score, False, 1.0 / p) for seq, o, score, p in alone]
    draws.sort(key=lambda d: (d.outcome_seq, d.pair_seq or 0, d.alone_seq or 0))
    return draws


class PairLedger(BettingLedger):
    """The rule's bets over one kind's draws, fed from the store in outcome order.

    weighted (the default): every gate the rule let through is a draw, its label taken
    with the audit's probability q: an audited answer weighs 1/q, an unaudited one is
    a draw with no error at the same weight, a gate the human answered anyway weighs 1.
    The bets then estimate the error of all the gates above a threshold, answered alone
    or not, without assuming the audited ones look like the escalated ones.
    Unweighted (`weighting: labelled`): the labelled pairs alone, each weighing 1."""

    def __init__(self, target: float, delta: float, weighted: bool = True) -> None:
        super().__init__(target, delta)
        self.weighted = weighted
        self.last_pair = self.last_alone = 0

    def update(self, store: RecordStore, kind: str) -> None:
        draws = rule_draws(store, kind, self.last_pair, self.last_alone)
        for d in draws:
            if d.pair_seq is not None:
                self.last_pair = max(self.last_pair, d.pair_seq)
                self.add(d.score, d.wrong, d.weight if self.weighted else 1.0)
            else:
                assert d.alone_seq is not None
                self.last_alone = max(self.last_alone, d.alone_seq)
                if self.weighted:
                    self.add(d.score, False, d.weight, labelled=False)
