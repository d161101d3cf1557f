"""The consult path's steps as plain functions over a memory and a predictor.

Activities wrap each step for Temporal; the replay evaluation calls `consult` directly.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel

from vicar.artifacts import load_artifact
from vicar.config import AutonomyParams, CalibrationParams, RetrievalOptions, Settings, autonomy_params
from vicar.memory.censor import CENSOR_DIMS
from vicar.memory.chunk import ARTIFACT_EMBED_CHARS, MemoryChunk, chunk_id_for, situation_text
from vicar.memory.principal import PrincipalMemory, noise_seed
from vicar.memory.retrieval import Hit, Query
from vicar.memory.text import clip
from vicar.models import (
    AnsweredBy,
    AutonomyRule,
    Calibration,
    CalibrationInputs,
    ChunkSummary,
    DialogTurn,
    GateRequest,
    LineageVerdict,
    OutcomeRecord,
    PassResult,
    RetrievalContext,
    Surprise,
)
from vicar.proxy.autonomy import audit_draw
from vicar.proxy.bookkeeping import context_key, load_entry
from vicar.proxy.calibration import calibrate
from vicar.proxy.censors import fire
from vicar.proxy.conflicts import genuine_tension
from vicar.proxy.decision import Decision, decide, surprised
from vicar.proxy.facts import FACT_KINDS
from vicar.proxy.ledger import autonomy_pairs, context_entry, ledger_rows
from vicar.proxy.lineage import lineage_of
from vicar.proxy.provider import Predictor
from vicar.proxy.recalibration import Recalibrator
from vicar.proxy.trust import AgentTrust, ledger
from vicar.proxy.withdrawal import DriftBook, PairLedger

LINEAGE_RESPONSE_CHARS = 300  # the human's words kept per lineage verdict
# Past artifacts whose answers the pre-review also reads (similar_work): the five of the
# five-most-similar baseline, set before any replay with it.
SIMILAR_WORK_K = 5


def build_query(
    request: GateRequest,
    n: int,
    phase: str,
    artifact: str = "",
    options: RetrievalOptions | None = None,
    noise: bool = False,
) -> Query:
    texts = {
        "situation": situation_text(request.state.value, request.task_type, request.question),
        "stimulus": request.actor_message,
    }
    if phase == "posterior":
        texts["artifact"] = artifact[:ARTIFACT_EMBED_CHARS]
    options = options or RetrievalOptions()
    return Query(
        now=n,
        # One search across kinds: the gate's episodes and the human's facts of the context.
        filters={
            "kind": [request.kind.value, *FACT_KINDS],
            "state": request.state.value,
            "task_type": request.task_type,
            "answered_by": AnsweredBy.human.value,
        },
        texts={k: v for k, v in texts.items() if v.strip()},
        mode=options.mode,
        embedding=options.embedding,
        lexical=options.lexical,
        # Noise fixed by (principal, N, phase): a retried retrieval sees the same draw.
        noise_seed=noise_seed(request.principal, n, phase) if noise else None,
    )


def retrieve(
    memory: PrincipalMemory,
    request: GateRequest,
    n: int,
    phase: str,
    artifact: str = "",
    options: RetrievalOptions | None = None,
    params: CalibrationParams | None = None,
    agent_trust: float | None = None,
) -> RetrievalContext:
    """`params`: also look up the upstream agent's trust (unless the caller passes the one
    its prior retrieval found), and check the context's censors against the artifact
    (posterior only)."""
    query = build_query(request, n, phase, artifact, options, noise=memory.params.noise_s > 0)
    hits = memory.retrieve(query)
    options = options or RetrievalOptions()
    facts = {f.id: f for f in memory.store.facts_by_id([c.id for _, c in hits if c.kind.value in FACT_KINDS])}
    censors, trust = [], agent_trust
    if params is not None and phase == "posterior":
        # The same texts the retrieval just embedded: the embedder's cache answers.
        censors = fire(
            memory, request, memory.query_vectors({d: t for d, t in query.texts.items() if d in CENSOR_DIMS}), params
        )
    if params is not None and request.upstream_agent and trust is None:
        trust = agent_trust_score(memory, request.upstream_agent)
    return RetrievalContext(
        censors=censors,
        agent_trust=trust,
        untrusted=params is not None and trust is not None and trust < params.trust_floor,
        principal=request.principal,
        n=n,
        phase=phase,
        chunks=[_summary(hit, chunk, facts[chunk.id].confidence if chunk.id in facts else None) for hit, chunk in hits],
        memory_size=memory.size(),
        memory_depth=memory.memory_depth(),
        lineage_history=lineage_history(memory, request, n, artifact, options.lineage_history),
        similar_work=similar_work(memory, request, n, artifact) if phase == "posterior" else [],
    )


def _summary(hit: Hit, chunk: MemoryChunk, confidence: float | None = None) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=chunk.id,
        kind=chunk.kind.value,
        state=chunk.state,
        task_type=chunk.task_type,
        confidence=confidence,
        outcome=chunk.outcome,
        answered_by=AnsweredBy(chunk.answered_by),
        question=chunk.question,
        artifact_excerpt=chunk.artifact_excerpt[:500],
        human_response=chunk.human_response,
        upstream_agent=chunk.upstream_agent,
        created_n=chunk.created_n,
        gate_id=chunk.gate_id,
        activation=hit.activation,
        similarity=hit.similarity,
        score=hit.score,
    )


def similar_work(
    memory: PrincipalMemory, request: GateRequest, n: int, artifact: str, k: int = SIMILAR_WORK_K
) -> list[ChunkSummary]:
    """The person's own answers on the `k` past artifacts most similar to this one, of
    the gate's kind but any state or task type, by the artifact's vector alone: the
    replies the similarity baselines draw on, which the gate's retrieval (one state and
    task type, a blend of dimensions) often leaves out. One more search of this
    principal's memory; the artifact's vector is the posterior query's, cached."""
    text = artifact[:ARTIFACT_EMBED_CHARS]
    if k <= 0 or not text.strip():
        return []
    query = Query(
        now=n,
        filters={"kind": request.kind.value, "answered_by": AnsweredBy.human.value},
        texts={"artifact": text},
        mode="similarity",
        top_k=k,
    )
    return [_summary(hit, chunk) for hit, chunk in memory.retrieve(query) if chunk.human_response.strip()]


def lineage_history(
    memory: PrincipalMemory, request: GateRequest, n: int, artifact: str, limit: int
) -> list[LineageVerdict]:
    """The principal's latest human verdicts on this artifact's lineage, most recent
    first, whatever their similarity. Whether the artifact changed since each is told
    only from an artifact this pass has seen: the prior (artifact "") gets None."""
    lin = lineage_of(request, artifact)
    return [
        LineageVerdict(
            chunk_id=c.id,
            action=c.outcome,
            response=clip(c.human_response, LINEAGE_RESPONSE_CHARS),
            n=c.created_n,
            gate_id=c.gate_id,
            ago=n - c.created_n,
            revision=c.revision,
            changed_since=(c.artifact_hash != lin.artifact_hash) if c.artifact_hash and lin.artifact_hash else None,
        )
        for c in memory.lineage_history(request.kind.value, lin.lineage, n, limit)
    ]


def outcome_chunk(record: OutcomeRecord, artifact: str | None = None) -> MemoryChunk:
    """`artifact`: the whole artifact the gate saw (the request's text plus its paths'
    contents); None for an inline-only artifact. Hashed, so a later gate on the same
    lineage can tell whether it changed; unknown ("") when paths were not read."""
    req = record.request
    surprise = record.surprise
    if artifact is None and req.artifact_paths:
        artifact = ""
    lin = lineage_of(req, artifact)
    return MemoryChunk(
        id=chunk_id_for(req.principal, record.workflow_id),
        principal=req.principal,
        kind=req.kind.value,
        state=req.state.value,
        task_type=req.task_type,
        outcome=record.action.value,
        answered_by=record.answered_by.value,
        responder=record.responder,
        gate_id=req.gate_id,
        question=req.question,
        artifact_excerpt=req.artifact_text[:4000],
        actor_message=req.actor_message,
        upstream_agent=req.upstream_agent,
        prior_confidence=record.prior.confidence if record.prior else None,
        prior_prose=record.prior.prose if record.prior else "",
        posterior_confidence=record.posterior.confidence if record.posterior else None,
        posterior_prose=record.posterior.prose if record.posterior else "",
        surprise_description=surprise.description if surprise else "",
        salient_percepts=surprise.percepts if surprise else [],
        human_response=record.response_text,
        created_n=record.n,
        traces=[record.n],
        lineage=lin.lineage,
        revision=lin.revision,
        artifact_hash=lin.artifact_hash,
    )


def agent_trust_score(memory: PrincipalMemory, agent: str) -> float:
    """The trust score of one upstream agent, from its ledger (two index ranges)."""
    rows = ledger(*ledger_rows(memory.store, agent))
    return rows[0].score if rows else AgentTrust(agent=agent).score


def recorded_tension(memory: PrincipalMemory, ctx: RetrievalContext) -> str:
    """A genuine tension consolidation recorded between two of the retrieved memories."""
    ids = {c.chunk_id for c in ctx.chunks}
    for a, b in sorted(memory.store.tensions()):
        if a in ids and b in ids:
            return f"memories {a} and {b} are in a genuine tension recorded by consolidation"
    return ""


# Per open store: its pair ledgers by (kind, target, delta) and drift books. One process
# holds a memory (the owner lock), so new pairs only come through this store: a ledger
# reads just those.
_windows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_windows_lock = threading.Lock()


def rule_in_force(
    store, principal_dir, base: AutonomyParams, state: str, kind: str = "gate", task_type: str | None = None
) -> AutonomyRule:
    """The autonomy rule a gate of this kind, state (and task type) is under now: the
    principal's latest pairs of the kind, under the parameters for the state (the
    defaults, then `autonomy.json`), and no threshold in a context the drift test has
    withdrawn (vicar.proxy.withdrawal). The one computation: a gate's consult, `vicar
    health` and the demo's footer all call it."""
    p = autonomy_params(base, principal_dir, state)
    with _windows_lock:
        windows = _windows.setdefault(store, {})
        key = (kind, p.target_error, p.delta, p.weighting)
        ledger = windows.setdefault(key, PairLedger(p.target_error, p.delta, p.weighting == "ipw"))
        ledger.update(store, kind)
        rule = ledger.rule(p.audit_share)
        if task_type is None:
            return rule
        book = windows.setdefault((kind, "drift", p.target_error, p.delta), DriftBook(p.target_error, p.delta))
        book.update(store, kind)
        w = book.withdrawn.get((state, task_type))
    if w is None:
        return rule
    return rule.model_copy(
        update={"threshold": None, "withdrawn": w.reason(p.target_error, p.delta), "withdrawn_seq": w.seq}
    )


def confidence_map(store, kind: str, window: int) -> tuple[float, float] | None:
    """The principal's recalibration of the confidence shown, over the latest `window`
    pairs of the kind (vicar.proxy.recalibration); None: none fitted yet, or off."""
    if window <= 0:
        return None
    with _windows_lock:
        recal = _windows.setdefault(store, {}).setdefault((kind, "recal", window), Recalibrator(window))
        recal.extend(autonomy_pairs(store, kind, after_seq=recal.last_seq))
        return recal.map


def autonomy_rule(memory: PrincipalMemory, request: GateRequest, params: CalibrationParams) -> AutonomyRule:
    """The autonomy rule for this gate (`rule_in_force` for its kind, state and task type)."""
    return rule_in_force(
        memory.store, memory.dir, params.autonomy, request.state.value, request.kind.value, request.task_type
    )


def calibration_inputs(
    memory: PrincipalMemory,
    request: GateRequest,
    ctx: RetrievalContext,
    params: CalibrationParams,
    *,
    now: datetime | None,
    gate_key: str,
) -> CalibrationInputs:
    """Everything the guards read: memory depth, tension among the retrieved memories,
    the context's last human answer, the autonomy rule, the gate's audit draw, the
    upstream agent's record and the censors that fired on the artifact."""
    entry = load_entry(context_entry(memory.store, context_key(request.state.value, request.task_type, request.kind)))
    return CalibrationInputs(
        memory_depth=ctx.memory_depth,
        tension=genuine_tension(ctx.chunks, params) or recorded_tension(memory, ctx),
        last_human_at=entry.last_human_at if entry else None,
        now=now,
        rule=autonomy_rule(memory, request, params),
        audit_draw=audit_draw(request.principal, gate_key),
        agent=request.upstream_agent or None,
        agent_human_answers=(
            memory.store.human_answers_from(request.upstream_agent, params.probation_answers)
            if request.upstream_agent
            else 0
        ),
        agent_trust=ctx.agent_trust,
        censors=ctx.censors,
        confidence_map=confidence_map(memory.store, request.kind.value, params.recalibration_window),
    )


class Consultation(BaseModel):
    prior: PassResult
    posterior: PassResult
    surprise: Surprise | None
    calibration: Calibration
    decision: Decision
    prior_context: RetrievalContext
    posterior_context: RetrievalContext


def consult(
    memory: PrincipalMemory,
    predictor: Predictor,
    request: GateRequest,
    n: int,
    settings: Settings,
    *,
    reinforce: bool = True,
    now: datetime | None = None,
    gate_key: str | None = None,
    dialog: Sequence[DialogTurn] = (),
    artifact: str | None = None,
    working_memory: str = "",
) -> Consultation:
    """The whole consult path in-process: the offline predictor's local activity and the
    replay evaluation run exactly this; LLM predictors run its steps as activities."""
    artifact = load_artifact(request, settings) if artifact is None else artifact
    prior_ctx = retrieve(memory, request, n, "prior", options=settings.retrieval, params=settings.calibration)
    prior_ctx.working_memory = working_memory  # the session's cacheable prefix
    prior = predictor.prior(request, prior_ctx, dialog)
    post_ctx = retrieve(
        memory,
        request,
        n,
        "posterior",
        artifact,
        settings.retrieval,
        settings.calibration,
        agent_trust=prior_ctx.agent_trust,
    )
    post_ctx.working_memory = working_memory
    posterior = predictor.posterior(request, post_ctx, artifact, prior, dialog)
    surprise = (
        predictor.surprise(request, artifact, prior, posterior, post_ctx) if surprised(prior, posterior) else None
    )
    calibration = calibrate(
        posterior.confidence,
        calibration_inputs(
            memory,
            request,
            post_ctx,
            settings.calibration,
            now=now,
            gate_key=gate_key or request.gate_id,
        ),
        settings.calibration,
    )
    if reinforce and posterior.used_chunk_ids:
        memory.reinforce(posterior.used_chunk_ids, n)
    return Consultation(
        prior=prior,
        posterior=posterior,
        surprise=surprise,
        calibration=calibration,
        decision=decide(request, calibration, posterior),
        prior_context=prior_ctx,
        posterior_context=post_ctx,
    )
