"""The audit trail read from a principal's record store (docs/audit.md): one AuditRecord
per gate, from the outcome log (answered gates) and the `unanswered` log (gates whose
deadline passed), merged in time order, a bounded page at a time.

Both logs hold the gate's OutcomeRecord JSON; what the record names only by id (the
memories the proxy used) is resolved here to bounded excerpts from the same store."""

from __future__ import annotations

import json
from typing import Any

from vicar.memory.chunk import MemoryChunk, chunk_id_for
from vicar.memory.store import RecordStore
from vicar.memory.text import clip
from vicar.models import OutcomeRecord
from vicar.models.audit import (
    ARTIFACT_EXCERPT_CHARS,
    MEMORY_EXCERPT_CHARS,
    AuditPage,
    AuditPageRequest,
    AuditRecord,
    MemoryUsed,
)
from vicar.proxy.lineage import artifact_hash
from vicar.proxy.reasons import ReasonFacts, reason_words
from vicar.proxy.reviews import reviews_of

OUTCOMES, UNANSWERED = "outcomes", "unanswered"


def log_unanswered(store: RecordStore, record: OutcomeRecord) -> bool:
    """Keep a gate that ended with no answer; False if it is kept already (a retry)."""
    with store.transaction(chunk_rows_kept=True) as db:
        cur = db.execute(
            "INSERT OR IGNORE INTO unanswered (workflow_id, at, record) VALUES (?, ?, ?)",
            (record.workflow_id, record.at.isoformat() if record.at else None, record.model_dump_json()),
        )
        return bool(cur.rowcount)


def is_unanswered(store: RecordStore, workflow_id: str) -> bool:
    with store.reading() as db:
        return db.execute("SELECT 1 FROM unanswered WHERE workflow_id = ?", (workflow_id,)).fetchone() is not None


def _rows(store: RecordStore, table: str, after: int, since: str | None, limit: int) -> list[tuple[int, str, str]]:
    # `table` is one of the two constants above, never input.
    sql = f"SELECT seq, COALESCE(at, ''), record FROM {table} WHERE seq > ?"
    params: list[Any] = [after]
    if since is not None:
        sql += " AND at >= ?"
        params.append(since)
    with store.reading() as db:
        return db.execute(sql + " ORDER BY seq LIMIT ?", (*params, limit)).fetchall()


def audit_page(store: RecordStore, req: AuditPageRequest) -> AuditPage:
    """The records after `req.after`, oldest first, until the page's JSON would pass
    `max_bytes` (one record at least) or holds `max_records`."""
    since = req.since.isoformat() if req.since else None
    fetch = req.max_records + 1
    logs = {
        OUTCOMES: _rows(store, OUTCOMES, req.after.outcomes, since, fetch),
        UNANSWERED: _rows(store, UNANSWERED, req.after.unanswered, since, fetch),
    }
    cursor = req.after.model_copy()
    records: list[AuditRecord] = []
    size = 0
    taken = {OUTCOMES: 0, UNANSWERED: 0}
    while len(records) < req.max_records:
        heads = [(logs[t][taken[t]][1], t) for t in logs if taken[t] < len(logs[t])]
        if not heads:
            break
        # At most max_records are taken, so neither log, read max_records + 1 rows deep, is
        # used up here: the next page's first record cannot come before this one's last.
        _, table = min(heads)
        seq, _, raw = logs[table][taken[table]]
        record = audit_record(store, raw)
        grown = size + len(record.model_dump_json()) + 1
        if records and grown > req.max_bytes:
            break
        records.append(record)
        size = grown
        taken[table] += 1
        setattr(cursor, table, seq)
    done = all(taken[t] == len(logs[t]) < fetch for t in logs)
    reviews = reviews_of(store, [r.workflow_id for r in records])
    for r in records:
        r.review = reviews.get(r.workflow_id)
    return AuditPage(records=records, cursor=cursor, done=done)


def memory_excerpt(c: MemoryChunk) -> str:
    head = f"[{c.kind.value} {c.state}/{c.task_type} n={c.created_n}, {c.answered_by}: {c.outcome}]"
    return clip(" ".join(x for x in (head, c.question, c.human_response) if x), MEMORY_EXCERPT_CHARS)


def audit_record(store: RecordStore, raw: str) -> AuditRecord:
    record = OutcomeRecord.model_validate_json(raw)
    extra = json.loads(raw)  # fields a newer record carries that this model may not (a rule's name)
    req = record.request
    post, cal = record.posterior, record.calibration
    used = list(
        dict.fromkeys((record.prior.used_chunk_ids if record.prior else []) + (post.used_chunk_ids if post else []))
    )
    own = chunk_id_for(req.principal, record.workflow_id)
    chunks = {c.id: c for c in store.get_chunks(used + [own], with_traces=False)}
    mine = chunks.get(own)
    if mine is not None and mine.artifact_hash:
        digest = mine.artifact_hash
    else:  # no chunk (a gate nobody answered): the inline artifact's, unknown with paths
        digest = "" if req.artifact_paths else artifact_hash(req.artifact_text)
    cal_extra = extra.get("calibration") or {}
    rule = extra.get("rule") or cal_extra.get("rule")
    answered_by = record.answered_by.value
    if answered_by == "rule" and not rule and cal is not None:
        rule = cal.guard
    timed_out = answered_by == "nobody" and not record.cancelled
    escalated = answered_by in ("human", "nobody") or record.escalated_at is not None
    # A gate a rule decided (answered, or asked about) carries the rule's note where the
    # proxy's words would be (the gate put it on an empty guess): it goes in rule_note.
    by_rule = cal is not None and cal.guard == "rule"
    rule_note = (cal.note if cal is not None else "") if by_rule or answered_by == "rule" else ""
    guess = (post.prose or ("" if by_rule or answered_by == "rule" else post.note)) if post else ""
    facts = ReasonFacts(
        guard=cal.guard if cal else "",
        note=cal.note if cal else "",
        escalated=escalated,
        escalation_mode=req.escalation_mode.value,
        answered_by=answered_by,
        confidence=cal.confidence if cal else None,
        threshold=cal.threshold_shown if cal else None,
        target=cal.target if cal else None,
        task_type=req.task_type,
        rule=str(rule) if rule else None,
        rule_author=_text(extra.get("rule_author") or cal_extra.get("rule_author")),
    )
    return AuditRecord(
        principal=req.principal,
        gate_id=req.gate_id,
        workflow_id=record.workflow_id,
        kind=req.kind.value,
        state=req.state.value,
        task_type=req.task_type,
        n=record.n,
        question=req.question,
        upstream_agent=req.upstream_agent,
        artifact_hash=digest,
        artifact_excerpt=clip(req.artifact_text, ARTIFACT_EXCERPT_CHARS),
        artifact_paths=list(req.artifact_paths),
        answered_by=answered_by,
        responder=record.responder,
        responder_identity=record.responder_identity,
        rule=str(rule) if rule else None,
        rule_author=facts.rule_author,
        rule_note=rule_note,
        lineage=req.lineage,
        ask_first=record.ask_first,
        timed_out=timed_out,
        cancelled=record.cancelled,
        escalated=escalated,
        action=record.action.value,
        words=record.response_text,
        proxy_action=post.action.value if post and post.action else None,
        proxy_words=guess,
        score=post.confidence if post else None,
        confidence=cal.confidence if cal else None,
        # One scale: the threshold beside the confidence shown (the raw one is in `why`'s
        # numbers and the score beside it); records from before it was kept, the raw one.
        threshold=(cal.threshold_shown if cal.threshold_shown is not None else cal.threshold) if cal else None,
        supported=cal.supported if cal else None,
        bound=cal.bound if cal else None,
        target=cal.target if cal else None,
        evidence=cal.evidence if cal else 0,
        errors=cal.errors if cal else 0,
        audit_share=cal_extra.get("audit_share"),
        guard=cal.guard if cal else "",
        guards_fired=list(cal.fired) if cal else [],
        why=cal.note if cal else "",
        reason_words=reason_words(facts),
        censors=list(cal.censors) if cal else [],
        memories=[MemoryUsed(chunk_id=i, excerpt=memory_excerpt(chunks[i]) if i in chunks else "") for i in used],
        dialog_turns=len(record.dialog),
        started_at=record.started_at,
        escalated_at=record.escalated_at,
        answered_at=record.at,
    )


def _text(value: object) -> str | None:
    return str(value) if value else None
