"""Censors (docs/design/memory-types.md): constraints learned from the human's repeated corrections
and rejections, checked at every gate of their context.

- Learned when a human correction or rejection makes `censor_min` of them in one context
  (state, task type) within `censor_similarity` of each other, and no live censor covers
  it yet. The trigger is their mean embedding; the reason, the human's latest words.
- A `block` censor that fires withholds the proxy's answer (guard `censor`); a `warn`
  one adds its reason to the prompt and to the escalation note.
- The human's answer to a censored gate is feedback: an approval was a false positive
  and multiplies the severity by `censor_fp_factor` (block, then warn, then
  deactivated); a correction or rejection confirms it and undoes one such step.
"""

from __future__ import annotations

import hashlib

import numpy as np

from vicar.memory.censor import CENSOR_DIMS, Censor, trigger_vectors
from vicar.memory.chunk import MemoryChunk
from vicar.memory.index import single_threaded_blas
from vicar.memory.principal import PrincipalMemory
from vicar.memory.text import clip
from vicar.models import Action, AnsweredBy, CensorHit, GateRequest, OutcomeRecord, RequestKind
from vicar.settings import CalibrationParams

BLOCK_AT = 0.75  # severity at or above: block
WARN_AT = 0.3  # at or above: warn; below: deactivated
REASON_CHARS = 300
PATTERN_EXCERPT = 120
PROVENANCE_SHOWN = 10  # the closest chunks kept as provenance (and averaged as the trigger)
REVERSALS = (Action.correct, Action.reject)
REENABLED_SEVERITY = 0.5  # at least: warn


def action_for(severity: float) -> str | None:
    return "block" if severity >= BLOCK_AT else "warn" if severity >= WARN_AT else None


def censor_id(principal: str, chunk_id: str) -> str:
    return "k-" + hashlib.sha256(f"{principal}\x00{chunk_id}".encode()).hexdigest()[:16]


def fire(
    memory: PrincipalMemory, request: GateRequest, query: dict[str, np.ndarray], params: CalibrationParams
) -> list[CensorHit]:
    """The live censors of this gate's context whose trigger is within the similarity of
    the artifact's vectors (`query`: its CENSOR_DIMS embeddings)."""
    if params.censor_min <= 0 or request.kind is not RequestKind.gate:
        return []
    query = {d: v for d, v in query.items() if d in CENSOR_DIMS}
    hits = []
    for c in memory.store.censors(request.kind.value, request.state.value, request.task_type):
        sim = c.similarity(query) if c.live else None
        if sim is not None and sim >= params.censor_similarity:
            hits.append(
                CensorHit(censor_id=c.id, action=c.action, reason=c.reason, pattern=c.pattern, similarity=round(sim, 4))
            )
    return sorted(hits, key=lambda h: (h.action != "block", -h.similarity))


def learn(memory: PrincipalMemory, chunk: MemoryChunk, params: CalibrationParams) -> Censor | None:
    """After a human correction or rejection is stored: a new censor when it is the
    `censor_min`-th alike in its context and no censor (but a deactivated one) already
    covers it. Idempotent: the id comes from the chunk, so a retry adds nothing."""
    if (
        params.censor_min <= 0
        or chunk.answered_by != AnsweredBy.human.value
        or chunk.outcome not in {a.value for a in REVERSALS}
        or chunk.kind.value != RequestKind.gate.value
    ):
        return None
    index = memory.index
    if chunk.id not in index.pos:
        return None
    query = index.vectors_of(chunk.id, CENSOR_DIMS)
    if not query:
        return None
    for c in memory.store.censors(chunk.kind.value, chunk.state, chunk.task_type):
        sim = c.similarity(query)
        if c.status != "deactivated" and sim is not None and sim >= params.censor_similarity:
            return None  # covered: a live or operator-disabled censor already says this
    base = {
        "kind": chunk.kind.value,
        "state": chunk.state,
        "task_type": chunk.task_type,
        "answered_by": AnsweredBy.human.value,
        "status": "active",
    }
    idx = np.concatenate([index.candidates({**base, "outcome": a.value}) for a in REVERSALS])
    idx = idx[idx != index.pos[chunk.id]]
    if len(idx) + 1 < params.censor_min:
        return None
    with single_threaded_blas():
        sim = np.nan_to_num(index.similarity(idx, query), nan=-1.0)
    close = np.flatnonzero(sim >= params.censor_similarity)
    if len(close) + 1 < params.censor_min:
        return None
    nearest = close[np.argsort(-sim[close], kind="stable")][: PROVENANCE_SHOWN - 1]
    provenance = [chunk.id, *(index.ids[idx[j]] for j in nearest)]
    vectors = [query, *(index.vectors_of(cid, CENSOR_DIMS) for cid in provenance[1:])]
    excerpt = clip(" ".join((chunk.artifact_excerpt or chunk.actor_message or chunk.question).split()), PATTERN_EXCERPT)
    reason = clip(chunk.human_response.strip(), REASON_CHARS) or (
        f"the human {chunk.outcome}ed {len(close) + 1} artifacts like this one"
    )
    censor = Censor(
        id=censor_id(chunk.principal, chunk.id),
        kind=chunk.kind.value,
        state=chunk.state,
        task_type=chunk.task_type,
        pattern=f"{chunk.state} {chunk.task_type}: {excerpt}",
        reason=reason,
        provenance=provenance,
        vectors=trigger_vectors(vectors),
        created_n=chunk.created_n,
        updated_n=chunk.created_n,
    )
    memory.store.add_censor(censor)
    return censor


def switched(c: Censor, enabled: bool) -> Censor:
    """An operator's disable or enable. A censor enabled again after false positives
    deactivated it comes back warning, not blocking."""
    if not enabled:
        return c.model_copy(update={"status": "disabled"})
    severity = max(c.severity, REENABLED_SEVERITY)
    return c.model_copy(update={"status": "active", "severity": severity, "action": action_for(severity)})


def feedback(record: OutcomeRecord, params: CalibrationParams):
    """(censor ids, their update) for the censors that fired on this gate: every firing
    is an activation; the human's approval a false positive, their correction or
    rejection a confirmation. None when no censor fired."""
    ids = record.calibration.censors if record.calibration else []
    if not ids:
        return None
    human = record.answered_by is AnsweredBy.human

    def change(c: Censor) -> Censor:
        update: dict = {"activations": c.activations + 1, "updated_n": record.n}
        if human and record.action is Action.approve:
            severity = c.severity * params.censor_fp_factor
            update |= {"false_positives": c.false_positives + 1, "severity": severity}
        elif human and record.action in REVERSALS:
            severity = min(1.0, c.severity / params.censor_fp_factor)
            update |= {"confirmations": c.confirmations + 1, "severity": severity}
        else:
            return c.model_copy(update=update)
        action = action_for(severity)
        update["action"] = action or c.action
        if action is None and c.status == "active":
            update["status"] = "deactivated"
        return c.model_copy(update=update)

    return ids, change
