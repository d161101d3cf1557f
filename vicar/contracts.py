"""Activity names and payloads shared by workflows and activities.

Workflows call activities by name so workflow modules never import the heavy
activity code (numpy, chromadb, torch, LLM SDKs).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from vicar.models import BrainConfig, GateRequest, PassResult, RetrievalContext, TurnRequest

BRAIN_WORKFLOW = "VicarBrain"
GATE_WORKFLOW = "VicarGate"

REQUEST_TURN = "request_turn"
RELEASE_TURN = "release_turn"
READ_COUNTER = "read_counter"
MIRROR_COUNTER = "mirror_counter"
RETRIEVE = "retrieve_context"
PRIOR_PASS = "prior_pass"
POSTERIOR_PASS = "posterior_pass"
EXTRACT_SURPRISE = "extract_surprise"
CALIBRATE = "calibrate"
REINFORCE = "reinforce"
RECORD_OUTCOME = "record_outcome"


def brain_workflow_id(principal: str) -> str:
    return f"vicar-brain/{principal}"


def gate_workflow_id(gate_id: str) -> str:
    return f"vicar-gate/{gate_id}"


class TurnAsk(BaseModel):
    principal: str
    turn: TurnRequest
    config: BrainConfig | None = None  # None: the worker's default


class TurnTicket(BaseModel):
    """What the worker tells a gate when it queues it: how to run the proxy's steps."""

    local_steps: bool
    n: int | None = None  # granted at once; None: wait for the brain's turn_granted signal


class CounterInput(BaseModel):
    principal: str
    n: int = 0


class RetrieveInput(BaseModel):
    request: GateRequest
    n: int


class RetrievalBundle(BaseModel):
    prior: RetrievalContext
    posterior: RetrievalContext


class PassInput(BaseModel):
    request: GateRequest
    ctx: RetrievalContext
    prior: PassResult | None = None


class SurpriseInput(BaseModel):
    request: GateRequest
    ctx: RetrievalContext
    prior: PassResult
    posterior: PassResult


class CalibrateInput(BaseModel):
    principal: str
    confidence: float
    memory_depth: int


class ReinforceInput(BaseModel):
    principal: str
    n: int
    chunk_ids: list[str] = Field(default_factory=list)
