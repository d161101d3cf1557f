"""Reviews after the fact (`vicar review GATE wrong|right`): a person's verdict on an
answer the proxy gave alone, kept in the principal's record store (the `reviews` table,
memory/migrations.py), one per gate.

A review is an audit label: like an audited gate's human answer, it says whether the
proxy was right where it acted alone. review_labels() hands them, in arrival order, to
whoever tests the proxy's error (the drift test). A second review of the same gate with
the same verdict changes nothing; with the other verdict it is refused (the first
stands: a label that flips would let the drift test be steered after the fact)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from vicar.memory.store import RecordStore
from vicar.models.audit import Review


class ReviewLabel(NamedTuple):
    seq: int  # arrival order of the review
    workflow_id: str  # the gate's
    state: str
    task_type: str
    score: float | None  # the proxy's score for the answer it gave alone
    right: bool
    reviewer: str
    note: str
    at: str  # ISO time of the review


_COLUMNS = "workflow_id, verdict, reviewer, identity, note, at"


def _review(row: tuple) -> Review:
    wid, verdict, reviewer, identity, note, at = row
    return Review(
        gate_workflow_id=wid,
        verdict=verdict,
        reviewer=reviewer,
        identity=identity,
        note=note,
        at=datetime.fromisoformat(at),
    )


def record_review(
    store: RecordStore, review: Review, *, state: str, task_type: str, score: float | None
) -> tuple[bool, Review]:
    """(True, review) when recorded; (False, the review already on record) when the gate
    has one (whatever its verdict: the caller tells a repeat from a contradiction)."""
    with store.transaction(chunk_rows_kept=True) as db:
        row = db.execute(f"SELECT {_COLUMNS} FROM reviews WHERE workflow_id = ?", (review.gate_workflow_id,)).fetchone()
        if row is not None:
            return False, _review(row)
        db.execute(
            "INSERT INTO reviews (workflow_id, state, task_type, score, verdict, reviewer, identity, note, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                review.gate_workflow_id,
                state,
                task_type,
                score,
                review.verdict,
                review.reviewer,
                review.identity,
                review.note,
                review.at.isoformat(),
            ),
        )
    return True, review


def review_of(store: RecordStore, workflow_id: str) -> Review | None:
    with store.reading() as db:
        row = db.execute(f"SELECT {_COLUMNS} FROM reviews WHERE workflow_id = ?", (workflow_id,)).fetchone()
    return _review(row) if row else None


def reviews_of(store: RecordStore, workflow_ids: list[str]) -> dict[str, Review]:
    if not workflow_ids:
        return {}
    marks = ", ".join("?" * len(workflow_ids))
    with store.reading() as db:
        rows = db.execute(f"SELECT {_COLUMNS} FROM reviews WHERE workflow_id IN ({marks})", workflow_ids).fetchall()
    return {r[0]: _review(r) for r in rows}


def review_labels(
    store: RecordStore, after_seq: int = 0, state: str | None = None, task_type: str | None = None
) -> list[ReviewLabel]:
    """Every review after `after_seq` (of one context, given), oldest first."""
    sql = "SELECT seq, workflow_id, state, task_type, score, verdict, reviewer, note, at FROM reviews WHERE seq > ?"
    params: list = [after_seq]
    if state is not None:
        sql += " AND state = ?"
        params.append(state)
    if task_type is not None:
        sql += " AND task_type = ?"
        params.append(task_type)
    with store.reading() as db:
        rows = db.execute(sql + " ORDER BY seq", params).fetchall()
    return [ReviewLabel(s, w, st, t, sc, v == "right", r, n, a) for s, w, st, t, sc, v, r, n, a in rows]
