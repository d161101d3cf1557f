"""The interface every predictor implements: the offline one, the learned one and the
LLM providers.

Predictors subclass `Predictor` explicitly, so each inherits `None` for the optional
abilities it lacks and states the ones it has by defining them. Callers test an
ability with plain attribute access (`if predictor.pin:`), never by probing names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar, Protocol

from vicar.models import (
    DialogTurn,
    GateRequest,
    ModelPin,
    OutcomeRecord,
    PassResult,
    RetrievalContext,
    Surprise,
    Usage,
)


class Predictor(Protocol):
    name: str
    # Fast enough for local activities (no network calls): the gate then runs its
    # consult as one local activity rather than regular ones.
    local: ClassVar[bool] = False

    # -- optional abilities (None: the predictor has not got it) -------------------------

    # Per-principal predictors (the worker's learned models): the principal's predictor
    # as pinned, held while the caller predicts. None: this one predictor serves all.
    using: Callable[[str, ModelPin | None], AbstractContextManager[Predictor]] | None = None
    # Under the gate's turn: the model version (and history) the gate will keep.
    pin: Callable[[str], ModelPin] | None = None
    # At consolidation: a new model version on every answer so far.
    refit: Callable[[str], ModelPin] | None = None
    # Drop what is kept of a principal whose memory moved away.
    forget: Callable[[str], None] | None = None
    # A learning predictor in a replay sees each recorded answer.
    observe: Callable[[OutcomeRecord], None] | None = None
    # Consolidation's judge for an ambiguous disagreement between two memory chunks
    # (older first): a conflict kind, or None. Without it they are kept as context.
    judge_conflict: Callable[[Any, Any], str | None] | None = None
    # Consolidation's reading of preferences from the latest human answers ((action,
    # words), newest first) as (subject, preference) pairs. Without it, the concern
    # words the human repeats stand in.
    extract_preferences: Callable[[str, str, Sequence[tuple[str, str]]], list[tuple[str, str]]] | None = None

    # -- the two passes -------------------------------------------------------------------

    def prior(self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()) -> PassResult:
        """Predict the human's reply without seeing the artifact. `PassResult.action` is
        the reply classified into the state's actions (Action.dialog for a question)."""
        raise NotImplementedError  # a subclass without its own passes (LearnedModels) is reached through `using`

    def posterior(
        self,
        request: GateRequest,
        ctx: RetrievalContext,
        artifact: str,
        prior: PassResult,
        dialog: Sequence[DialogTurn] = (),
    ) -> PassResult:
        """Predict again with the artifact and the prior in view."""
        raise NotImplementedError

    def surprise(
        self,
        request: GateRequest,
        artifact: str,
        prior: PassResult,
        posterior: PassResult,
        ctx: RetrievalContext,
    ) -> Surprise:
        """What in the artifact moved the confidence (called only when it moved > 0.3)."""
        raise NotImplementedError

    def agent_reply(
        self, request: GateRequest, artifact: str, dialog: Sequence[DialogTurn]
    ) -> tuple[str, Usage | None]:
        """The agent side's answer to the reviewer's last dialog line (the design's
        _generate_dialog_response). Empty text means the agent side has nothing to add."""
        raise NotImplementedError


def predicting(predictor: Predictor, principal: str, pin: ModelPin | None = None) -> AbstractContextManager[Predictor]:
    """The predictor for one principal: a learned model's (as pinned, held while the
    caller predicts), or `predictor` itself when it serves every principal."""
    return predictor.using(principal, pin) if predictor.using else nullcontext(predictor)
