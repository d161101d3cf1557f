"""The LLM predictor: the design's two-pass prediction with a language model.

Each pass is one call to the main model (cacheable prefix: system prompt + working
memory; body: gate, memories, dialog, for the posterior the fenced artifact and the
prior) followed by one call to the cheaper classifier model that maps the predicted
reply onto the gate's actions. Runs inside activities only: it makes network calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from vicar.llm import prompts
from vicar.llm.base import LLMClient
from vicar.llm.choice import LLMChoice, make_client
from vicar.llm.parse import parse_action, parse_reply, parse_surprise
from vicar.llm.pricing import price_for
from vicar.models import (
    Action,
    DialogTurn,
    GateRequest,
    PassResult,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.models.prereview import PreReviewItem
from vicar.proxy.answer_words import judge_citations
from vicar.proxy.prereview import pre_review
from vicar.proxy.provider import Predictor

PASS_MAX_TOKENS = 1024
CLASSIFY_MAX_TOKENS = 16
PREFERENCES_MAX_TOKENS = 400  # five short lines
SURPRISE_MAX_TOKENS = 400
AGENT_MAX_TOKENS = 600
SURPRISE_MAGNITUDE = 0.5  # the design's value for a confidence shift > 0.3


class LLMPredictor(Predictor):
    """Abilities: judge_conflict and extract_preferences (consolidation's LLM calls)."""

    local = False  # network calls: the gate runs its steps as regular activities

    def __init__(
        self, client: LLMClient, model: str, classifier_model: str, *, pass_max_tokens: int = PASS_MAX_TOKENS
    ) -> None:
        # Unpriced models are refused now, at configuration, not billed as zero later.
        price_for(model)
        price_for(classifier_model)
        self.client = client
        self.name = client.provider
        self.model = model
        self.classifier_model = classifier_model
        self.pass_max_tokens = pass_max_tokens

    @classmethod
    def from_env(cls, provider: str) -> "LLMPredictor":
        choice = LLMChoice.from_env(provider)
        return cls(make_client(choice), choice.model, choice.classifier_model)

    # -- the two passes -----------------------------------------------------

    def prior(self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()) -> PassResult:
        chunks = ctx.chunks[: prompts.MAX_MEMORIES_SHOWN]
        body = prompts.pass_body(request, chunks, dialog, lineage=ctx.lineage_history, untrusted=ctx.untrusted)
        return self._pass(request, ctx, chunks, body)

    def posterior(
        self,
        request: GateRequest,
        ctx: RetrievalContext,
        artifact: str,
        prior: PassResult,
        dialog: Sequence[DialogTurn] = (),
    ) -> PassResult:
        chunks = ctx.chunks[: prompts.MAX_MEMORIES_SHOWN]
        # The person's own words for this artifact, numbered for the model to cite.
        items = pre_review(ctx, request, artifact)
        body = prompts.pass_body(
            request,
            chunks,
            dialog,
            artifact=artifact,
            prior=prior,
            lineage=ctx.lineage_history,
            censors=ctx.censors,
            untrusted=ctx.untrusted,
            prereview=items,
        )
        return self._pass(request, ctx, chunks, body, items)

    def surprise(
        self,
        request: GateRequest,
        artifact: str,
        prior: PassResult,
        posterior: PassResult,
        ctx: RetrievalContext,
    ) -> Surprise:
        out = self.client.complete(
            [prompts.SURPRISE_SYSTEM],
            prompts.surprise_body(request, artifact, prior, posterior),
            model=self.classifier_model,
            max_tokens=SURPRISE_MAX_TOKENS,
        )
        description, percepts = parse_surprise(out.text)
        if not description:  # the call was paid for; keep what is known rather than fail
            direction = "raised" if posterior.confidence > prior.confidence else "lowered"
            description = (
                f"The artifact {direction} confidence from {prior.confidence:.2f} to {posterior.confidence:.2f}."
            )
        return Surprise(magnitude=SURPRISE_MAGNITUDE, description=description, percepts=percepts, usage=out.usage)

    def agent_reply(
        self, request: GateRequest, artifact: str, dialog: Sequence[DialogTurn]
    ) -> tuple[str, Usage | None]:
        if not dialog or dialog[-1].speaker != "reviewer":
            return "", None  # nothing asked of the agent side
        out = self.client.complete(
            [prompts.AGENT_SYSTEM],
            prompts.agent_body(request, artifact, dialog),
            model=self.classifier_model,
            max_tokens=AGENT_MAX_TOKENS,
        )
        return out.text.strip(), out.usage

    def judge_conflict(self, a, b) -> str | None:
        """Consolidation's LLM judge for an ambiguous disagreement (a, b: memory chunks,
        older first): one of prompts.CONFLICT_KINDS, or None if the reply is not one."""
        out = self.client.complete(
            [prompts.JUDGE_SYSTEM],
            prompts.judge_body(a, b),
            model=self.classifier_model,
            max_tokens=CLASSIFY_MAX_TOKENS,
        )
        word = out.text.strip().splitlines()[-1].strip().strip("*_`'\".:;!, ").lower() if out.text.strip() else ""
        return word if word in prompts.CONFLICT_KINDS else None

    def extract_preferences(
        self, state: str, task_type: str, answers: Sequence[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Consolidation's preference extraction: (subject, preference) pairs the model
        reads from the context's latest human answers ((action, words), newest first)."""
        out = self.client.complete(
            [prompts.PREFERENCES_SYSTEM],
            prompts.preferences_body(state, task_type, answers),
            model=self.classifier_model,
            max_tokens=PREFERENCES_MAX_TOKENS,
        )
        return prompts.parse_preferences(out.text)

    # -- internals ------------------------------------------------------------

    def _pass(
        self, request: GateRequest, ctx: RetrievalContext, chunks, body: str, items: list[PreReviewItem] | None = None
    ) -> PassResult:
        """`items`: the pre-review the body showed (the posterior): the reply's citations
        are judged against it, and the markers leave the answer before it is classified."""
        out = self.client.complete(
            prompts.reviewer_prefix(ctx.working_memory),
            body,
            model=self.model,
            max_tokens=self.pass_max_tokens,
        )
        usage = out.usage
        prose, confidence, found = parse_reply(out.text)
        unsupported: list[str] = []
        if items is not None:
            prose, items, unsupported = judge_citations(prose, items)
        notes: list[str] = []
        action: Action | None = None
        if not prose:
            # A bare confidence is no prediction: nothing could be the answer.
            confidence = 0.0
            notes.append(f"The model gave no reply (stop reason: {out.stop_reason or 'unknown'}).")
        else:
            if not found:
                notes.append("The reply ended without a usable CONFIDENCE line: confidence 0.")
            action, classify_usage = self._classify(request, prose)
            usage = usage + classify_usage
            if action is None:
                notes.append("The predicted reply could not be classified into an action.")
        if out.stop_reason in ("max_tokens", "length"):
            notes.append("The reply was cut off at the token limit.")
        return PassResult(
            prose=prose,
            note=" ".join(notes),
            confidence=confidence,
            action=action,
            # The memories shown, the verdicts on the artifact's thread among them.
            used_chunk_ids=list(
                dict.fromkeys([*(c.chunk_id for c in chunks), *(v.chunk_id for v in ctx.lineage_history)])
            ),
            usage=usage,
            prereview=items or [],
            unsupported=unsupported,
        )

    def _classify(self, request: GateRequest, prose: str) -> tuple[Action | None, Usage]:
        valid = request.valid_actions
        if len(valid) == 1:  # an agent's question: any reply is the answer, no call needed
            return valid[0], Usage()
        out = self.client.complete(
            [prompts.CLASSIFIER_SYSTEM],
            prompts.classify_body(request, prose, valid),
            model=self.classifier_model,
            max_tokens=CLASSIFY_MAX_TOKENS,
        )
        return parse_action(out.text, valid), out.usage
