"""The proxy's bookkeeping in a principal's record store: the outcome log, the context
entries (proxy-confidence.json's), the regrets and the trust ledger's counts. The
autonomy rule's evidence rows are written here, with their outcome, and read by
vicar.proxy.autonomy.ledger.

The memory keeps the records and their schema (memory/migrations.py) and lends its
transaction and its reads; what the rows mean, and what goes in them when a gate
ends, is the proxy's reasoning and lives here. An outcome and all it teaches go in
one transaction, once per gate workflow id: a retry finds the row and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from vicar.memory.censor import Censor
from vicar.memory.chunk import MemoryChunk
from vicar.memory.fact import Fact
from vicar.memory.store import RecordStore
from vicar.models import RequestKind
from vicar.proxy.autonomy.ledger import Alone, Evidence
from vicar.proxy.bookkeeping import context_key, load_entry
from vicar.proxy.trust import AgentTrust, ledger

# (decision id, op, chunk id, target id, reason): a row of the consolidation audit log.
AuditRow = tuple[str, str, str, str | None, str]


class Regret(NamedTuple):
    chunk_id: str  # the proxy's answer the human later reversed
    agent: str | None
    outcome_seq: int  # the outcome that found it


class GateCount(NamedTuple):
    agent: str
    answered_by: str
    outcome: str
    gates: int


class WrongCount(NamedTuple):
    agent: str
    regret: bool  # a wrong pair that is not a regret is an override
    pairs: int


class LedgerRows(NamedTuple):
    gates: list[GateCount]
    wrong: list[WrongCount]


@dataclass(frozen=True)
class OutcomeEntry:
    """Everything one gate's outcome writes, in one transaction."""

    workflow_id: str
    state: str
    task_type: str
    answered_by: str
    action: str
    at: str | None  # ISO time of the answer
    record: str  # the OutcomeRecord's JSON
    context_key: str
    update: Callable[[str | None], str]  # the stored context entry JSON (or None) to the new one
    evidence: Evidence | None = None
    alone: Alone | None = None  # answered alone, not audited
    regrets: Sequence[MemoryChunk] = ()  # the proxy's answers this outcome reversed
    censor_ids: Sequence[str] = ()  # the censors that fired on the gate ...
    censor_change: Callable[[Censor], Censor] | None = None  # ... and what the answer says of them
    facts: Sequence[Fact] = ()  # how the answer moved the human's preferences
    fact_audit: Sequence[AuditRow] = ()
    marks: Sequence[tuple[str, str]] = ()  # (chunk id, mark): what the answer said beyond its action


@dataclass(frozen=True)
class LoggedOutcome:
    new: bool  # False: this gate's outcome was already logged (a retry); nothing changed
    seq: int  # the outcome's place in the log


def log_outcome(store: RecordStore, entry: OutcomeEntry) -> LoggedOutcome:
    """Log a gate's outcome with its bookkeeping. Each regret is a wrong pair once,
    whichever outcome finds it first."""
    e = entry
    with store.transaction(chunk_rows_kept=True) as db:
        cur = db.execute(
            "INSERT OR IGNORE INTO outcomes (workflow_id, state, task_type, answered_by, action, at, record)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (e.workflow_id, e.state, e.task_type, e.answered_by, e.action, e.at, e.record),
        )
        if not cur.rowcount:
            seq = db.execute("SELECT seq FROM outcomes WHERE workflow_id = ?", (e.workflow_id,)).fetchone()[0]
            return LoggedOutcome(new=False, seq=seq)
        seq = cur.lastrowid
        assert seq is not None  # the row was just inserted
        row = db.execute("SELECT entry FROM contexts WHERE key = ?", (e.context_key,)).fetchone()
        db.execute(
            "INSERT OR REPLACE INTO contexts (key, entry) VALUES (?, ?)",
            (e.context_key, e.update(row[0] if row else None)),
        )
        if e.evidence is not None:
            ev = e.evidence
            db.execute(
                "INSERT INTO autonomy_pairs (outcome_seq, agent, kind, state, task_type, n, score, correct, audit_p)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, ev.agent, ev.kind, e.state, e.task_type, ev.n, ev.score, int(ev.correct), ev.audit_p),
            )
        db.executemany("INSERT OR IGNORE INTO answer_marks (chunk_id, mark) VALUES (?, ?)", e.marks)
        if e.alone is not None:
            db.execute(
                "INSERT INTO autonomy_alone (outcome_seq, kind, state, task_type, score, audit_p)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (seq, e.alone.kind, e.state, e.task_type, e.alone.score, e.alone.audit_p),
            )
        for c in e.regrets:
            # A proxy answer with no score (the proxy could not run) proves nothing.
            if c.posterior_confidence is not None:
                db.execute(
                    "INSERT OR IGNORE INTO autonomy_pairs (outcome_seq, regret_of, agent, kind, state,"
                    " task_type, n, score, correct) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    (
                        seq,
                        c.id,
                        c.upstream_agent,
                        c.kind.value,
                        c.state,
                        c.task_type,
                        c.created_n,
                        c.posterior_confidence,
                    ),
                )
        if e.censor_change is not None:
            for cid in e.censor_ids:
                store.change_censor(db, cid, e.censor_change)
        store.write_facts(db, e.facts, e.fact_audit)
        return LoggedOutcome(new=True, seq=seq)


def regrets(store: RecordStore) -> list[Regret]:
    """Every regret, in the order found."""
    with store.reading() as db:
        return [
            Regret(*r)
            for r in db.execute(
                "SELECT regret_of, agent, outcome_seq FROM autonomy_pairs WHERE regret_of IS NOT NULL ORDER BY seq"
            )
        ]


def ledger_rows(store: RecordStore, agent: str | None = None) -> LedgerRows:
    """The trust ledger's counts, per upstream agent (or of one), over its gate chunks
    and over the autonomy evidence. All agents: one grouped scan each, an operator's
    report; one agent: two index ranges, read at each of its gates."""
    one = agent is not None
    with store.reading() as db:
        gates = db.execute(
            "SELECT upstream_agent, answered_by, outcome, COUNT(*) FROM chunks"
            + (
                " INDEXED BY chunks_agent WHERE upstream_agent = ?"
                if one
                else " WHERE upstream_agent IS NOT NULL AND upstream_agent != ''"
            )
            + " AND kind = 'gate' GROUP BY 1, 2, 3",
            (agent,) if one else (),
        ).fetchall()
        wrong = db.execute(
            "SELECT agent, regret_of IS NOT NULL, COUNT(*) FROM autonomy_pairs"
            + (
                " INDEXED BY autonomy_pairs_agent WHERE agent = ?"
                if one
                else " WHERE agent IS NOT NULL AND agent != ''"
            )
            + " AND correct = 0 GROUP BY 1, 2",
            (agent,) if one else (),
        ).fetchall()
    return LedgerRows([GateCount(*r) for r in gates], [WrongCount(a, bool(r), k) for a, r, k in wrong])


def agent_trust_score(store: RecordStore, agent: str) -> float:
    """The trust score of one upstream agent, from its counts (two index ranges)."""
    rows = ledger(*ledger_rows(store, agent))
    return rows[0].score if rows else AgentTrust(agent=agent).score


def context_entry(store: RecordStore, key: str) -> str | None:
    """One context's entry JSON (None: no outcome in it yet)."""
    with store.reading() as db:
        row = db.execute("SELECT entry FROM contexts WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def last_human_at(store: RecordStore, state: str, task_type: str, kind: RequestKind) -> datetime | None:
    """When the person last answered a gate of this context (None: never), from its entry."""
    key = context_key(state, task_type, kind)
    with store.reading() as db:
        row = db.execute("SELECT entry FROM contexts WHERE key = ?", (key,)).fetchone()
    entry = load_entry(row[0] if row else None)
    return entry.last_human_at if entry else None


def context_entries(store: RecordStore) -> list[tuple[str, str]]:
    """(key, entry JSON) of every context, by key."""
    with store.reading() as db:
        return db.execute("SELECT key, entry FROM contexts ORDER BY key").fetchall()
