"""Heuristic triage of disagreeing memories (the design's classify_conflict).

Two human answers in the same state and task type that disagree are one of:
- retrieval noise: one of them is not really about this case (low similarity);
- preference drift: far apart in interaction time, the newer one is the human now;
- context sensitivity: they concern different upstream agents, or artifacts that differ
  (the answer followed the artifact: a plan without a rollback step corrected, one with
  it approved), so both can be right and the predictor, which reads the artifact, judges;
- genuine tension: relevant, close in time, same context, alike artifacts: the human is
  of two minds about the same case, and the proxy must not resolve it alone.
"""

from __future__ import annotations

from enum import Enum
from itertools import combinations

from vicar.memory.principal import PrincipalMemory
from vicar.models import AnsweredBy, ChunkSummary, RetrievalContext
from vicar.models.vocabulary import TERMINAL_ACTIONS
from vicar.settings import CalibrationParams

_TERMINAL = {a.value for a in TERMINAL_ACTIONS}
# Two artifacts at least this alike (cosine of their vectors) are one case: re-rolls of one
# patch, the same plan again. Set by what a near-duplicate is for all-MiniLM-L6-v2, not on
# the replay: the demo's different plans of one task type sit at 0.31-0.85.
SAME_CASE = 0.95


class ConflictKind(str, Enum):
    retrieval_noise = "retrieval_noise"
    preference_drift = "preference_drift"
    context_sensitivity = "context_sensitivity"
    genuine_tension = "genuine_tension"


def classify_conflict(a: ChunkSummary, b: ChunkSummary, params: CalibrationParams) -> ConflictKind | None:
    """None when the two do not conflict (same outcome, or not both human answers)."""
    if a.outcome == b.outcome or a.answered_by is not AnsweredBy.human or b.answered_by is not AnsweredBy.human:
        return None
    if a.outcome not in _TERMINAL or b.outcome not in _TERMINAL:
        return None
    if min(a.similarity or 0.0, b.similarity or 0.0) < params.tension_similarity:
        return ConflictKind.retrieval_noise
    if abs(a.created_n - b.created_n) > params.tension_window:
        return ConflictKind.preference_drift
    if (a.upstream_agent or "") != (b.upstream_agent or ""):
        return ConflictKind.context_sensitivity
    return ConflictKind.genuine_tension


def genuine_tension(
    chunks: list[ChunkSummary], params: CalibrationParams, memory: PrincipalMemory | None = None
) -> str:
    """A description of the first genuine tension among the retrieved memories, or "".
    With `memory`, two answers whose artifacts differ are context sensitivity, not tension."""
    for a, b in combinations(chunks, 2):
        if classify_conflict(a, b, params) is not ConflictKind.genuine_tension:
            continue
        alike = memory.similarity(a.chunk_id, b.chunk_id, "artifact") if memory is not None else None
        if alike is None or alike >= SAME_CASE:
            return (
                f"memories {a.chunk_id} ({a.outcome}, N={a.created_n}) and "
                f"{b.chunk_id} ({b.outcome}, N={b.created_n}) disagree on a case like this one"
            )
    return ""


def tension(memory: PrincipalMemory, ctx: RetrievalContext, params: CalibrationParams) -> str:
    """A genuine tension among the retrieved memories: two of them now, or one that
    consolidation recorded between two of them ("" : none)."""
    return genuine_tension(ctx.chunks, params, memory) or recorded_tension(memory, ctx)


def recorded_tension(memory: PrincipalMemory, ctx: RetrievalContext) -> str:
    """A genuine tension consolidation recorded between two of the retrieved memories."""
    ids = {c.chunk_id for c in ctx.chunks}
    for a, b in sorted(memory.store.tensions()):
        if a in ids and b in ids:
            return f"memories {a} and {b} are in a genuine tension recorded by consolidation"
    return ""
