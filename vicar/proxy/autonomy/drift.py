"""Drift: autonomy withdrawn from a context the moment its audits show the error above
target, and re-earned by the same rule.

Each context (state, task type) has a drift test (vicar.proxy.autonomy.bets.DriftTest)
over the labels of the proxy's answers there that nobody chose to look at for their
content: the random audits, and the human's after-the-fact reviews (`vicar review`;
those are chosen by the human, so they can only make a withdrawal come sooner, the safe
side). When the test's wealth reaches 1/delta, the context is withdrawn: the rule
states no threshold there, with the reason, and every gate of it goes to the human.
Those answers are pairs of the context; the same rule over them alone (the bets over
the pairs since the withdrawal) proves a threshold again, and then the context is
reinstated with a fresh drift test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from vicar.memory.store import RecordStore
from vicar.proxy.autonomy.bets import STARTS, BettingLedger, DriftTest
from vicar.proxy.reviews import review_labels

Context = tuple[str, str]  # (state, task type)


class LabelledPair(NamedTuple):
    """A pair with how its label came and where: what the sequential rule and the drift
    test read."""

    seq: int
    score: float
    correct: bool
    audit_p: float | None  # drawn as an audit with this probability (None: labelled anyway)
    state: str
    task_type: str


def labelled_pairs(store: RecordStore, kind: str, after_seq: int = 0) -> list[LabelledPair]:
    """One kind's pairs after `after_seq`, oldest first, with their audit probability
    and context."""
    with store.reading() as db:
        rows = db.execute(
            "SELECT seq, score, correct, audit_p, state, task_type FROM autonomy_pairs"
            " WHERE kind = ? AND seq > ? ORDER BY seq",
            (kind, after_seq),
        ).fetchall()
    return [LabelledPair(seq, score, bool(ok), p, st, tt) for seq, score, ok, p, st, tt in rows]


@dataclass
class Withdrawal:
    seq: int  # the pair (or review) that showed the drift
    audits: int  # labels the drift test had seen
    errors: int  # of those, wrong
    ledger: BettingLedger  # the same rule over the context's pairs since, re-earning it

    def reason(self, target: float, delta: float) -> str:
        return (
            f"autonomy withdrawn: the audits of this context show its error above target {target:g} at "
            f"{1 - delta:.0%} confidence ({self.errors} wrong of {self.audits} audited); it is re-earned by "
            f"the same rule over its answers since ({int(self.ledger.count.max())} so far)"
        )


@dataclass
class DriftBook:
    """One kind's drift tests per context, read incrementally from the store."""

    target: float
    delta: float
    last_pair: int = 0
    last_review: int = 0
    tests: dict[Context, DriftTest] = field(default_factory=dict)
    counts: dict[Context, list[int]] = field(default_factory=dict)  # (labels, wrong) per test
    withdrawn: dict[Context, Withdrawal] = field(default_factory=dict)

    def label(self, ctx: Context, seq: int, wrong: bool) -> None:
        """An audit or review label of an answer the proxy gave (or would have given) alone."""
        if ctx in self.withdrawn:
            return
        test = self.tests.setdefault(ctx, DriftTest(self.target, self.delta))
        count = self.counts.setdefault(ctx, [0, 0])
        count[0] += 1
        count[1] += int(wrong)
        if test.add(wrong):
            ledger = BettingLedger(self.target, self.delta)
            self.withdrawn[ctx] = Withdrawal(seq=seq, audits=count[0], errors=count[1], ledger=ledger)
            del self.tests[ctx], self.counts[ctx]

    def pair(self, ctx: Context, score: float, correct: bool) -> None:
        """Any pair of the context: a withdrawn one re-earns autonomy on them."""
        w = self.withdrawn.get(ctx)
        if w is None:
            return
        w.ledger.add(score, not correct)
        if w.ledger.threshold(STARTS) is not None:
            del self.withdrawn[ctx]  # re-earned: a fresh drift test from here

    def update(self, store: RecordStore, kind: str) -> None:
        for p in labelled_pairs(store, kind, after_seq=self.last_pair):
            ctx = (p.state, p.task_type)
            if p.audit_p is not None:
                self.label(ctx, p.seq, not p.correct)
            else:
                self.pair(ctx, p.score, p.correct)
            self.last_pair = p.seq
        if kind != "gate":
            return
        for r in review_labels(store, after_seq=self.last_review):
            self.label((r.state, r.task_type), r.seq, not r.right)
            self.last_review = r.seq
