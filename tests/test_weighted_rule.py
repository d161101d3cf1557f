"""The rule's bets weigh an audit's label by the inverse of its probability: every gate the
rule let through is a draw, audited or not (docs/autonomy-bound.md)."""

from __future__ import annotations

import sqlite3

from vicar.memory.migrations import MIGRATIONS
from vicar.memory.principal import PrincipalMemory
from vicar.memory.store import RecordStore
from vicar.models import AnsweredBy
from vicar.proxy.autonomy.ledger import PairLedger, rule_draws
from vicar.proxy.outcomes import record_outcome
from vicar.settings import MemoryParams

from .test_autonomy import outcome

Q = 0.05


def _alone(p: str, i: int, score: float, audit: float = Q):
    rec = outcome(p, i, "approve", "approve", score, by=AnsweredBy.proxy, guard="passthrough")
    assert rec.calibration is not None
    rec.calibration.audit_share = audit
    return rec


def _audited(p: str, i: int, score: float, right: bool):
    rec = outcome(p, i, "approve" if right else "reject", "approve", score, guard="audit")
    assert rec.calibration is not None
    rec.calibration.audit_share = Q
    return rec


def test_every_gate_let_through_is_a_draw_and_an_audit_weighs_its_inverse(tmp_path, embedder):
    p = "dora"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        record_outcome(memory, outcome(p, 1, "approve", "approve", 0.6), artifacts=False)  # escalated
        record_outcome(memory, _alone(p, 2, 0.97), artifacts=False)
        record_outcome(memory, _alone(p, 2, 0.97), artifacts=False)  # a retried activity: once
        record_outcome(memory, _audited(p, 3, 0.96, right=False), artifacts=False)
        record_outcome(memory, _alone(p, 4, 0.98, audit=0.0), artifacts=False)  # nothing audited: no draw
        never = outcome(p, 5, "approve", "approve", 0.5, by=AnsweredBy.proxy, guard="unproven")
        record_outcome(memory, never, artifacts=False)  # answered in `never` mode, not let through
        draws = rule_draws(memory.store, "gate")
        assert [(d.score, d.wrong, d.weight) for d in draws] == [
            (0.6, False, 1.0),
            (0.97, False, 20.0),
            (0.96, True, 20.0),
        ]
        assert [d.outcome_seq for d in draws] == sorted(d.outcome_seq for d in draws)
        # read on from where a reader stopped
        first = draws[1]
        later = rule_draws(memory.store, "gate", after_pair=draws[0].pair_seq or 0, after_alone=first.alone_seq or 0)
        assert [(d.score, d.wrong) for d in later] == [(0.96, True)]
    finally:
        memory.close()


def test_the_weighted_bet_counts_an_audited_error_for_all_the_gates_it_stands_for(tmp_path, embedder):
    """100 right escalations, then 42 answers alone of which two were audited, one wrong:
    unweighted, the labelled pairs say 1 wrong in 102; weighted, the wrong audit stands
    for the 20 gates it was drawn from, among 142 draws (an unbiased estimate of the
    error of every gate let through: 20/142, not 1/102)."""
    p = "erin"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        i = 0
        for _ in range(100):
            i += 1
            record_outcome(memory, outcome(p, i, "approve", "approve", 0.97), artifacts=False)
        for k in range(42):
            i += 1
            if k in (20, 30):
                record_outcome(memory, _audited(p, i, 0.97, right=k == 30), artifacts=False)
            else:
                record_outcome(memory, _alone(p, i, 0.97), artifacts=False)
        weighted, labelled = PairLedger(0.05, 0.05), PairLedger(0.05, 0.05, weighted=False)
        weighted.update(memory.store, "gate")
        labelled.update(memory.store, "gate")
        at = [j for j, t in enumerate(weighted.grid) if t <= 0.97][0]
        assert weighted.count[at] == 142 and labelled.count[at] == 102
        # The evidence stated is the human answers: an unaudited draw is no answer.
        assert weighted.labelled[at] == labelled.labelled[at] == 102
        assert weighted.errors[at] == 20.0 and labelled.errors[at] == 1.0
        # Each bet is bounded by its weight: an unaudited draw earns a small, safe gain.
        assert 0 < weighted.log_wealth[at] and weighted.log_wealth[at] != labelled.log_wealth[at]
        # a second update reads nothing again
        before = weighted.count.copy()
        weighted.update(memory.store, "gate")
        assert (weighted.count == before).all()
    finally:
        memory.close()


def test_a_store_from_before_fills_the_draws_from_its_outcome_log(tmp_path, embedder):
    """The gates answered alone before the table existed become draws when the store is
    migrated: from the outcome records, in order."""
    p = "fred"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        record_outcome(memory, _alone(p, 1, 0.97), artifacts=False)
        record_outcome(memory, outcome(p, 2, "approve", "approve", 0.6), artifacts=False)
        record_outcome(memory, _alone(p, 3, 0.99, audit=0.1), artifacts=False)
        path = memory.store.path
    finally:
        memory.close()
    # The store as it was before the table: its migration then runs on the outcome log
    # alone (later migrations are about other tables and have run already).
    creates = next(i for i, sql in enumerate(MIGRATIONS) if "CREATE TABLE autonomy_alone" in sql)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE autonomy_alone")
    db.executescript(MIGRATIONS[creates])
    db.commit()
    db.close()
    store = RecordStore(path)
    try:
        draws = rule_draws(store, "gate")
        assert [(d.score, d.wrong, d.weight) for d in draws] == [
            (0.97, False, 20.0),
            (0.6, False, 1.0),
            (0.99, False, 10.0),
        ]
    finally:
        store.close()
