"""What a gate's consult reads of the principal's memory: the retrieval of the prior
pass (the memory alone) and of the posterior pass (with the artifact), each with the
person's verdicts on the artifact's lineage; the posterior's also with the similar
past work, the censors that fire on the artifact and the upstream agent's trust.
"""

from __future__ import annotations

from vicar.memory.censor import CENSOR_DIMS
from vicar.memory.chunk import ARTIFACT_EMBED_CHARS, FACT_KINDS, MemoryChunk, situation_text
from vicar.memory.principal import PrincipalMemory, noise_seed
from vicar.memory.retrieval import Hit, Query
from vicar.memory.text import clip
from vicar.models import AnsweredBy, ChunkSummary, GateRequest, LineageVerdict, RetrievalContext
from vicar.proxy.censors import fire
from vicar.proxy.lineage import lineage_of
from vicar.proxy.outcome_log import agent_trust_score
from vicar.settings import CalibrationParams, RetrievalOptions, Settings

LINEAGE_RESPONSE_CHARS = 300  # the human's words kept per lineage verdict
# Past artifacts whose answers the pre-review also reads (similar_work): the five of the
# five-most-similar baseline, set before any replay with it.
SIMILAR_WORK_K = 5
# A memory this small is not split by task type where the task type has no answer yet:
# the first gate of a new task type finds the person's answers on the others (ranked by
# similarity, whose situation text names the task type), where it found nothing (30% of a
# new person's first 10 gates had no proposal on the permission study's data). The learned
# model reads only the task type's own (vicar.proxy.learned), so its memory features mean the same
# at every size, and borrowed memories are not reinforced (docs/team-prior.md).
SMALL_HISTORY = 50


def contexts(
    memory: PrincipalMemory, request: GateRequest, n: int, artifact: str, settings: Settings, working_memory: str = ""
) -> tuple[RetrievalContext, RetrievalContext]:
    """The prior's and the posterior's retrieval, read together before either pass: the
    posterior's does not depend on the prior pass, only on the agent trust the prior's
    retrieval looked up."""
    prior = retrieve(memory, request, n, "prior", options=settings.retrieval, params=settings.calibration)
    posterior = retrieve(
        memory,
        request,
        n,
        "posterior",
        artifact,
        settings.retrieval,
        settings.calibration,
        agent_trust=prior.agent_trust,
    )
    prior.working_memory = posterior.working_memory = working_memory  # the session's cacheable prefix
    return prior, posterior


def build_query(
    request: GateRequest,
    n: int,
    phase: str,
    artifact: str = "",
    options: RetrievalOptions | None = None,
    noise: bool = False,
    split: bool = True,
) -> Query:
    """`split`: look within the gate's task type only (a small history is not split:
    see `SMALL_HISTORY`)."""
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
            **({"task_type": request.task_type} if split else {}),
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
    noise = memory.params.noise_s > 0
    query = build_query(request, n, phase, artifact, options, noise=noise)
    hits = memory.retrieve(query)
    if memory.size() < SMALL_HISTORY and not any(c.kind.value not in FACT_KINDS for _, c in hits):
        # A small memory with no answer in this task type: the person's answers on the others.
        query = build_query(request, n, phase, artifact, options, noise=noise, split=False)
        hits = memory.retrieve(query)
    options = options or RetrievalOptions()
    # What the memory holds for this gate first (the hits, the person's answers on similar
    # work and on the lineage), then what is judged of it (censors, the agent's trust).
    facts = {f.id: f for f in memory.store.facts_by_id([c.id for _, c in hits if c.kind.value in FACT_KINDS])}
    chunks = [_summary(hit, chunk, facts[chunk.id].confidence if chunk.id in facts else None) for hit, chunk in hits]
    # Similar to the artifact this pass sees: the prior sees none, so it has no similar work.
    similar = similar_work(memory, request, n, artifact if phase == "posterior" else "")
    lineage = lineage_history(memory, request, n, artifact, options.lineage_history)
    censors, trust = [], agent_trust
    if params is not None and phase == "posterior":
        # The same texts the retrieval just embedded: the embedder's cache answers.
        censors = fire(
            memory, request, memory.query_vectors({d: t for d, t in query.texts.items() if d in CENSOR_DIMS}), params
        )
    if params is not None and request.upstream_agent and trust is None:
        trust = agent_trust_score(memory.store, request.upstream_agent)
    return RetrievalContext(
        censors=censors,
        agent_trust=trust,
        untrusted=params is not None and trust is not None and trust < params.trust_floor,
        principal=request.principal,
        n=n,
        phase=phase,
        chunks=chunks,
        memory_size=memory.size(),
        memory_depth=memory.memory_depth(),
        lineage_history=lineage,
        similar_work=similar,
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
