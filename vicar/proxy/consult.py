"""A gate's consult, the one path from a request to a decision: the memory read
(vicar.proxy.retrieval), the predictor's two passes, the guards and the autonomy rule
(vicar.proxy.calibration), then the decision (vicar.proxy.decision).

The offline predictor's local activity and the replay evaluation run `consult` as is;
LLM predictors run its steps as activities (activities/proxy.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel

from vicar.artifacts import load_artifact
from vicar.memory.principal import PrincipalMemory
from vicar.models import Calibration, DialogTurn, GateRequest, ModelPin, PassResult, RetrievalContext, Surprise
from vicar.proxy.calibration import calibrate, calibration_inputs
from vicar.proxy.decision import Decision, decide, surprised
from vicar.proxy.provider import Predictor, predicting
from vicar.proxy.retrieval import contexts
from vicar.settings import Settings


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
    pin: ModelPin | None = None,
) -> Consultation:
    """The whole consult path in-process, in the order it needs its steps: the artifact,
    the memory read, the two passes, the guards and the rule, the decision. `gate_key`
    (the gate's workflow id; default: its gate id) fixes its audit draw and names it as
    the announcer of a withdrawal; `pin` is the model version the gate pinned (a
    predictor with versions: the worker's learned models)."""
    artifact = load_artifact(request, settings) if artifact is None else artifact
    prior_ctx, post_ctx = contexts(memory, request, n, artifact, settings, working_memory)
    # The principal's predictor is held from its first pass to its last (the surprise);
    # the memory read above needs none of it.
    with predicting(predictor, request.principal, pin) as held:
        prior = held.prior(request, prior_ctx, dialog)
        posterior = held.posterior(request, post_ctx, artifact, prior, dialog)
        calibration = calibrate(
            posterior.confidence,
            calibration_inputs(
                memory,
                request,
                post_ctx,
                settings.calibration,
                now=now,
                gate_key=gate_key or request.gate_id,
                action=posterior.action,
                artifact=artifact,
            ),
            settings.calibration,
        )
        if reinforce and posterior.used_chunk_ids:
            memory.reinforce(posterior.used_chunk_ids, n)
        surprise = held.surprise(request, artifact, prior, posterior, post_ctx) if surprised(prior, posterior) else None
    return Consultation(
        prior=prior,
        posterior=posterior,
        surprise=surprise,
        calibration=calibration,
        decision=decide(request, calibration, posterior),
        prior_context=prior_ctx,
        posterior_context=post_ctx,
    )
