"""The interface every predictor implements: the offline one here, LLM providers later."""

from __future__ import annotations

from typing import Protocol

from vicar.models import GateRequest, PassResult, RetrievalContext, Surprise


class Predictor(Protocol):
    name: str
    local: bool  # fast enough for local activities (no network calls)

    def prior(self, request: GateRequest, ctx: RetrievalContext) -> PassResult:
        """Predict the human's reply without seeing the artifact."""
        ...

    def posterior(
        self, request: GateRequest, ctx: RetrievalContext, artifact: str, prior: PassResult
    ) -> PassResult:
        """Predict again with the artifact and the prior in view."""
        ...

    def surprise(
        self, request: GateRequest, artifact: str, prior: PassResult, posterior: PassResult,
        ctx: RetrievalContext,
    ) -> Surprise:
        """What in the artifact moved the confidence (called only when it moved > 0.3)."""
        ...
