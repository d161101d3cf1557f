"""Post-session consolidation: each new chunk of the session against its nearest
existing ones, decided ADD / UPDATE / DELETE / SKIP (Mem0's taxonomy), then applied.

Planning is pure over the memory's state; applying is idempotent per decision (its id
is logged in the same SQLite transaction as its effect), so a consolidation killed
mid-way and run again from the same plan ends with the same memory.

- ADD: no similar memory, or a disagreement both sides of which stay (context
  sensitivity, genuine tension: the tension is recorded for the calibration guard).
- SKIP: the same answer again, nothing new to keep beyond the chunk itself.
- UPDATE: the same decision in new words: the existing chunk really changes (it takes
  the newer response text, re-embedded, and the new chunk's traces); the new chunk is
  superseded by it.
- DELETE: preference drift: the older chunk is superseded by the newer (kept, marked,
  left out of retrieval, a tombstone copy in the audit log). Nothing is ever removed.

Verdicts are resolved before they are applied so that every cluster keeps an active
chunk: a supersession that would leave none (A by B and B by A) is refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vicar.memory.chunk import BLENDED, MemoryChunk
from vicar.memory.consolidation_plan import ConsolidationDecision, ConsolidationPlan, ConsolidationReport
from vicar.memory.index import single_threaded_blas
from vicar.memory.principal import PrincipalMemory

CASE_DIMS = ("situation", "artifact", "stimulus")  # what makes two gates the same case
NEAR = 0.8  # below: a different case (retrieval noise), the chunk is simply added
SAME = 0.9  # different outcomes at or above: clear enough for the heuristics; below: ambiguous
DRIFT_WINDOW = 50  # interactions apart: further means the human's preference moved

Judge = Callable[[MemoryChunk, MemoryChunk], str | None]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _neighbours(memory: PrincipalMemory, chunk: MemoryChunk, exclude: set[str]) -> list[tuple[str, float]]:
    index = memory.index
    query = index.vectors_of(chunk.id, CASE_DIMS)
    if not query:
        return []
    idx = index.candidates(
        {
            "kind": chunk.kind.value,
            "state": chunk.state,
            "task_type": chunk.task_type,
            "answered_by": "human",
            "status": "active",
        }
    )
    idx = np.array([i for i in idx if index.ids[i] not in exclude], dtype=np.int64)
    if len(idx) == 0:
        return []
    with single_threaded_blas():
        sim = index.similarity(idx, query)
    order = np.argsort(-np.nan_to_num(sim, nan=-1.0))[:5]
    return [(index.ids[idx[j]], float(sim[j])) for j in order if not np.isnan(sim[j])]


def plan_consolidation(
    memory: PrincipalMemory,
    session_id: str,
    new_chunk_ids: list[str],
    judge: Judge | None = None,
    near: float = NEAR,
    same: float = SAME,
) -> ConsolidationPlan:
    new = sorted(
        (c for c in memory.store.get_chunks(new_chunk_ids) if c.answered_by == "human" and c.status == "active"),
        key=lambda c: (c.created_n, c.id),
    )
    superseded_by: dict[str, str] = {}

    def representative(cid: str) -> str:
        seen = set()
        while cid in superseded_by and cid not in seen:
            seen.add(cid)
            cid = superseded_by[cid]
        return cid

    def supersede(old: str, by: str) -> bool:
        """Refuse a verdict that would leave the cluster with no active chunk."""
        if representative(by) == old:
            return False
        superseded_by[old] = representative(by)
        return True

    out: list[ConsolidationDecision] = []
    for b in new:
        did = f"{session_id}:{b.id}"
        if b.id in superseded_by:
            out.append(
                ConsolidationDecision(
                    decision_id=did,
                    op="SKIP",
                    chunk_id=b.id,
                    reason="already superseded by an earlier verdict of this session",
                )
            )
            continue
        close = [(cid, s) for cid, s in _neighbours(memory, b, {b.id} | set(superseded_by)) if s >= near]
        if not close:
            out.append(
                ConsolidationDecision(
                    decision_id=did, op="ADD", chunk_id=b.id, reason=f"no memory of this case (similarity < {near})"
                )
            )
            continue
        a_id, sim = close[0]
        a = memory.store.get_chunk(a_id)
        assert a is not None  # the index holds only recorded chunks
        common = dict(decision_id=did, chunk_id=b.id, target_id=a_id, similarity=round(sim, 4))
        if a.outcome == b.outcome:
            if not b.human_response.strip() or _norm(a.human_response) == _norm(b.human_response):
                out.append(
                    ConsolidationDecision(op="SKIP", **common, reason=f"the same answer ({b.outcome}) as {a_id} again")
                )
            elif supersede(b.id, a_id):
                out.append(
                    ConsolidationDecision(
                        op="UPDATE",
                        superseded=b.id,
                        **common,
                        reason=f"the same decision ({b.outcome}) in newer words: "
                        f"{a_id} takes them, {b.id} is folded into it",
                    )
                )
            else:
                out.append(ConsolidationDecision(op="ADD", **common, reason="folding would empty the cluster"))
            continue
        older, newer = (a, b) if (a.created_n, a.id) < (b.created_n, b.id) else (b, a)
        if sim < same:
            verdict = judge(older, newer) if judge else None
            kind = verdict or "context_sensitivity"
            why = (
                f"ambiguous (similarity {sim:.2f}), judged by the LLM"
                if verdict
                else f"ambiguous (similarity {sim:.2f}), kept both: no judge" + ("" if judge else " offline")
            )
        elif newer.created_n - older.created_n > DRIFT_WINDOW:
            kind, why = "preference_drift", f"{newer.created_n - older.created_n} interactions apart"
        elif (a.upstream_agent or "") != (b.upstream_agent or ""):
            kind, why = "context_sensitivity", "different upstream agents"
        else:
            kind, why = "genuine_tension", f"the same case {newer.created_n - older.created_n} interactions apart"
        if kind == "preference_drift" and supersede(older.id, newer.id):
            out.append(
                ConsolidationDecision(
                    op="DELETE",
                    superseded=older.id,
                    conflict=kind,
                    **common,
                    reason=f"preference drift ({why}): {older.outcome} -> {newer.outcome}, the newer answer stands",
                )
            )
        else:
            out.append(
                ConsolidationDecision(
                    op="ADD", conflict=kind, **common, reason=f"{kind.replace('_', ' ')} ({why}): both kept"
                )
            )
    return ConsolidationPlan(session_id=session_id, decisions=out)


def apply_consolidation(
    memory: PrincipalMemory, plan: ConsolidationPlan, on_step: Callable[[int], None] | None = None
) -> ConsolidationReport:
    """Apply each decision once. Safe to run again after a crash: done decisions are
    found in the audit log and skipped; an UPDATE's vectors are written before its
    record, and writing the same vectors again is harmless."""
    store = memory.store
    done = store.applied_decisions(plan.session_id)
    report = ConsolidationReport(session_id=plan.session_id)
    for i, d in enumerate(plan.decisions):
        report.counts[d.op] = report.counts.get(d.op, 0) + 1
        if d.superseded:
            report.superseded.append(d.superseded)
        if d.conflict == "genuine_tension":
            report.tensions += 1
        if d.decision_id in done:
            continue
        if on_step:
            on_step(i)
        if d.op == "UPDATE":
            _apply_update(memory, d, plan.session_id)
        else:
            _apply_simple(memory, d, plan.session_id)
        report.applied += 1
    return report


def _apply_simple(memory: PrincipalMemory, d: ConsolidationDecision, session_id: str) -> None:
    store = memory.store
    with memory._lock:
        tomb = None
        if d.superseded:
            gone = store.get_chunk(d.superseded)
            assert gone is not None  # what a decision supersedes was recorded
            tomb = gone.model_dump_json()
        with store.transaction() as db:
            if not store.log_decision(db, d.decision_id, session_id, d.op, d.chunk_id, d.target_id, d.reason, tomb):
                return
            if d.superseded:
                by = d.chunk_id if d.superseded != d.chunk_id else d.target_id
                db.execute(
                    "UPDATE chunks SET status = 'superseded', superseded_by = ? WHERE id = ?", (by, d.superseded)
                )
            if d.conflict == "genuine_tension":
                assert d.target_id is not None  # a conflict is between two chunks
                a, b = sorted((d.chunk_id, d.target_id))
                db.execute("INSERT OR IGNORE INTO tensions VALUES (?, ?, ?)", (a, b, session_id))
        if d.superseded:
            memory.index.set_field(d.superseded, "status", "superseded")


def _apply_update(memory: PrincipalMemory, d: ConsolidationDecision, session_id: str) -> None:
    store = memory.store
    assert d.target_id is not None  # an UPDATE folds its chunk into a target
    new = store.get_chunk(d.chunk_id)
    target = store.get_chunk(d.target_id)
    assert new is not None and target is not None  # both recorded before the plan was made
    updated = target.model_copy(update={"human_response": new.human_response})
    texts = {k: v for k, v in updated.vector_texts(memory.params.blended_vectors).items() if k in ("response", BLENDED)}
    vecs = dict(zip(texts, memory.embedder.embed(list(texts.values())))) if texts else {}
    with memory._lock:
        memory.vectors.upsert(target.id, vecs)  # first: a retry rewrites the same vectors
        with store.transaction() as db:
            if not store.log_decision(
                db, d.decision_id, session_id, "UPDATE", d.chunk_id, d.target_id, d.reason, new.model_dump_json()
            ):
                return
            db.execute("UPDATE chunks SET human_response = ? WHERE id = ?", (new.human_response, target.id))
            added = [
                n
                for n in new.traces
                if db.execute("INSERT OR IGNORE INTO traces (chunk_id, n) VALUES (?, ?)", (target.id, n)).rowcount
            ]
            db.execute("UPDATE chunks SET status = 'superseded', superseded_by = ? WHERE id = ?", (target.id, new.id))
        for n in added:
            memory.index.add_trace(target.id, n)
        for dim, vec in vecs.items():
            memory.index.set_vector(target.id, dim, vec)
        memory.index.set_field(new.id, "status", "superseded")
        memory.lexical.invalidate()


def memory_fingerprint(memory: PrincipalMemory) -> list[tuple]:
    """Every chunk's record, status and traces: two memories with the same fingerprint
    hold the same knowledge (the kill-and-restart test compares them)."""
    return [
        (c.id, c.outcome, c.human_response, c.status, c.superseded_by, tuple(c.traces)) for c in memory.store.chunks()
    ]
