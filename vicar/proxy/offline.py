"""The offline predictor: deterministic, memory-only, no API key.

It predicts the human's reply by an activation- and similarity-weighted vote over the
retrieved human answers. Its confidence is agreement x depth of evidence, so a gate
with no relevant memory gets a low confidence and goes to the human. It never reads a
confidence out of text, so an artifact cannot talk it into approving.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from vicar.memory.chunk import FACT_KINDS
from vicar.models import (
    Action,
    AnsweredBy,
    ChunkSummary,
    DialogTurn,
    GateRequest,
    PassResult,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.models.vocabulary import TERMINAL_ACTIONS
from vicar.proxy.answer_words import DEFAULT_TEXT, with_prereview
from vicar.proxy.provider import Predictor
from vicar.settings import PredictorParams

# How sharply the vote focuses on the most similar memories (cosine units).
KERNEL_WIDTH = 0.05
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{3,}")
_STOP = frozenset(
    "this that with from have will would should could there their about which when what "
    "into been were they them then than also only more most some such very just like "
    "approve revise proposed plan intent deliverable patch series".split()
)


class OfflinePredictor(Predictor):
    """Abilities: none beyond the passes (one predictor for every principal)."""

    name = "offline"
    local = True  # milliseconds per step: the gate runs its steps as local activities

    def __init__(self, params: PredictorParams | None = None) -> None:
        self.params = params or PredictorParams()

    # -- the two passes -----------------------------------------------------

    def prior(self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()) -> PassResult:
        return self._vote(request, ctx)

    def posterior(
        self,
        request: GateRequest,
        ctx: RetrievalContext,
        artifact: str,
        prior: PassResult,
        dialog: Sequence[DialogTurn] = (),
    ) -> PassResult:
        # The artifact reaches this predictor only through retrieval similarity and the
        # pre-review's match of past concerns: never parsed for instructions or numbers.
        return with_prereview(self._vote(request, ctx), request, ctx, artifact, dialog)

    def surprise(
        self,
        request: GateRequest,
        artifact: str,
        prior: PassResult,
        posterior: PassResult,
        ctx: RetrievalContext,
    ) -> Surprise:
        moved = posterior.confidence - prior.confidence
        direction = "raised" if moved > 0 else "lowered"
        shift = (
            f"; predicted action {prior.action.value if prior.action else 'none'} -> "
            f"{posterior.action.value if posterior.action else 'none'}"
            if prior.action != posterior.action
            else ""
        )
        description = (
            f"The artifact {direction} confidence from {prior.confidence:.2f} to {posterior.confidence:.2f}{shift}."
        )
        return Surprise(magnitude=0.5, description=description, percepts=self._percepts(artifact, ctx, posterior))

    def agent_reply(
        self, request: GateRequest, artifact: str, dialog: Sequence[DialogTurn]
    ) -> tuple[str, Usage | None]:
        # Without a language model the agent side can only point at what it already
        # submitted; the offline reviewer never asks (it votes over past answers).
        return (request.actor_message.strip() or "Please see the submitted artifact.", None)

    # -- internals ------------------------------------------------------------

    def _evidence(self, ctx: RetrievalContext) -> list[tuple[ChunkSummary, float, float]]:
        """Human-answered chunks with (vote weight, evidence mass). Proxy answers never
        count: the proxy must not learn from itself.

        The vote focuses sharply on the most similar memories (what this human did in
        the closest case); the evidence mass counts every relevant memory, so depth of
        experience and agreement are measured separately."""
        # Facts are not answers to a gate: they inform, they do not vote.
        human = [c for c in ctx.chunks if c.answered_by is AnsweredBy.human and c.kind not in FACT_KINDS]
        if not human:
            return []
        min_sim = self.params.min_similarity
        sims = [c.similarity if c.similarity is not None else min_sim for c in human]
        best = max(sims)
        acts = [c.activation for c in human]
        lo, hi = min(acts), max(acts)
        out = []
        for c, sim, act in zip(human, sims, acts):
            relevance = min(max((sim - min_sim) / (1.0 - min_sim), 0.0), 1.0)
            if relevance <= 0.0:
                continue
            focus = math.exp((sim - best) / KERNEL_WIDTH)
            # More active (recent, reinforced) memories weigh up to twice as much.
            recency = 1.0 + ((act - lo) / (hi - lo) if hi > lo else 1.0)
            out.append((c, relevance * focus * recency, relevance))
        return out

    def distribution(self, ctx: RetrievalContext) -> dict[str, float] | None:
        """The vote as a distribution over the gate actions, for weighing it against the
        other predictors by log-loss (vicar.proxy.choose): the weighted tally's shares as
        far as the evidence is deep, uniform for the rest. None without evidence."""
        evidence = self._evidence(ctx)
        if not evidence:
            return None
        tally: dict[str, float] = {}
        for c, w, _ in evidence:
            tally[c.outcome] = tally.get(c.outcome, 0.0) + w
        total = sum(tally.values())
        depth = 1.0 - math.exp(-sum(m for _, _, m in evidence) / self.params.evidence_scale)
        actions = list(dict.fromkeys([a.value for a in TERMINAL_ACTIONS] + list(tally)))
        return {a: depth * tally.get(a, 0.0) / total + (1.0 - depth) / len(actions) for a in actions}

    def _vote(self, request: GateRequest, ctx: RetrievalContext) -> PassResult:
        evidence = self._evidence(ctx)
        if not evidence:
            return PassResult(
                prose="",
                note=(
                    f"I have no memory of how the human answers {request.state.value} gates "
                    f"for {request.task_type}; this needs the human."
                ),
                confidence=0.0,
            )
        tally: dict[str, float] = {}
        for c, w, _ in evidence:
            tally[c.outcome] = tally.get(c.outcome, 0.0) + w
        total = sum(tally.values())
        mass = sum(m for _, _, m in evidence)
        # Ties break toward the more cautious action: never toward approve by accident.
        caution = {
            a.value: i
            for i, a in enumerate([Action.reject, Action.correct, Action.hold, Action.withdraw, Action.approve])
        }
        outcome = max(tally, key=lambda o: (tally[o], -caution.get(o, 99)))
        agreement = tally[outcome] / total
        depth = 1.0 - math.exp(-mass / self.params.evidence_scale)
        try:
            action = Action(outcome)
        except ValueError:
            return PassResult(prose="", note=f"Memory holds an unknown outcome {outcome!r}.", confidence=0.0)
        best = max((e for e in evidence if e[0].outcome == outcome), key=lambda e: e[1])[0]
        text = best.human_response.strip() or DEFAULT_TEXT.get(action, "")
        return PassResult(
            prose=text,
            confidence=round(agreement * depth, 4),
            action=action,
            # Memories a small memory borrowed from other task types vote, but only the task
            # type's own are reinforced (retrieval.SMALL_HISTORY).
            used_chunk_ids=[c.chunk_id for c, _, _ in evidence if c.task_type == request.task_type],
        )

    def _percepts(self, artifact: str, ctx: RetrievalContext, posterior: PassResult) -> list[str]:
        """Artifact words that also occur in the memories that decided the posterior."""
        used = set(posterior.used_chunk_ids)
        memory_words: set[str] = set()
        for c in ctx.chunks:
            if c.chunk_id in used:
                memory_words |= {w.lower() for w in _WORD.findall(c.human_response + " " + c.artifact_excerpt)}
        seen: list[str] = []
        for w in _WORD.findall(artifact):
            lw = w.lower()
            if lw in _STOP or lw in seen:
                continue
            if lw in memory_words:
                seen.append(lw)
            if len(seen) == 5:
                break
        if len(seen) < 2:  # fall back to the artifact's first distinctive words
            for w in _WORD.findall(artifact):
                lw = w.lower()
                if lw not in _STOP and lw not in seen:
                    seen.append(lw)
                if len(seen) >= 2:
                    break
        return seen
