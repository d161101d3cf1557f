"""The interface every predictor implements: the offline one and the LLM providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vicar.models import Action, DialogTurn, GateRequest, PassResult, RetrievalContext, Surprise, Usage


class Predictor(Protocol):
    name: str
    local: bool  # fast enough for local activities (no network calls)

    def prior(
        self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()
    ) -> PassResult:
        """Predict the human's reply without seeing the artifact. `PassResult.action` is
        the reply classified into the state's actions (Action.dialog for a question)."""
        ...

    def posterior(
        self, request: GateRequest, ctx: RetrievalContext, artifact: str, prior: PassResult,
        dialog: Sequence[DialogTurn] = (),
    ) -> PassResult:
        """Predict again with the artifact and the prior in view."""
        ...

    def surprise(
        self, request: GateRequest, artifact: str, prior: PassResult, posterior: PassResult,
        ctx: RetrievalContext,
    ) -> Surprise:
        """What in the artifact moved the confidence (called only when it moved > 0.3)."""
        ...

    def agent_reply(
        self, request: GateRequest, artifact: str, dialog: Sequence[DialogTurn]
    ) -> tuple[str, Usage | None]:
        """The agent side's answer to the reviewer's last dialog line (the design's
        _generate_dialog_response). Empty text means the agent side has nothing to add."""
        ...
