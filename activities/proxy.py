"""The gate's and the brain's activities. Each is idempotent: Temporal may run it again.

They are synchronous and run in the worker's thread pool, so blocking I/O (SQLite,
Chroma, the embedding model) never runs on the event loop.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from memory.principal import MemoryRegistry
from vicar import contracts as c
from vicar.artifacts import ArtifactRefused, load_artifact
from vicar.config import TASK_QUEUE, Settings
from vicar.models import TurnReply, BrainConfig, BrainInput, Calibration, OutcomeRecord, PassResult, Surprise
from vicar.proxy.calibration import calibrate
from vicar.proxy.consult import calibration_inputs, consult, retrieve
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.provider import Predictor


class ProxyActivities:
    def __init__(
        self, client: Client, registry: MemoryRegistry, predictor: Predictor, settings: Settings,
        brain_config: BrainConfig | None = None, task_queue: str = TASK_QUEUE,
    ) -> None:
        self.client = client
        self.registry = registry
        self.predictor = predictor
        self.settings = settings
        self.brain_config = brain_config or BrainConfig()
        self.task_queue = task_queue

    def _artifact(self, request) -> str:
        try:
            return load_artifact(request, self.settings)
        except ArtifactRefused as exc:
            # No retry makes a refused path readable: the gate goes to the human at once,
            # with the reason (guard proxy_error).
            raise ApplicationError(str(exc), type="ArtifactRefused", non_retryable=True) from None

    def all(self) -> list:
        return [
            self.request_turn, self.release_turn, self.read_counter, self.mirror_counter, self.consult,
            self.retrieve_context, self.prior_pass, self.posterior_pass, self.extract_surprise,
            self.calibrate, self.reinforce, self.agent_reply, self.record_outcome,
        ]

    # -- brain ---------------------------------------------------------------

    @activity.defn(name=c.REQUEST_TURN)
    async def request_turn(self, ask: c.TurnAsk) -> c.TurnTicket:
        """Ask the principal's brain for a turn, starting the brain if needed
        (update-with-start). The update id derives from the gate, so a retry is
        deduplicated by the brain run; across runs the brain's gate -> N map is."""
        reply = await self.client.execute_update_with_start_workflow(
            "take_turn", ask.turn,
            start_workflow_operation=WithStartWorkflowOperation(
                c.BRAIN_WORKFLOW,
                BrainInput(principal=ask.principal, config=ask.config or self.brain_config),
                id=c.brain_workflow_id(ask.principal),
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
            id=f"turn/{ask.turn.workflow_id}",
            result_type=TurnReply,
        )
        return c.TurnTicket(local_steps=getattr(self.predictor, "local", False), n=reply.n,
                            max_dialog_turns=self.settings.max_dialog_turns)

    @activity.defn(name=c.RELEASE_TURN)
    async def release_turn(self, ask: c.TurnAsk) -> None:
        """Give the turn back. Idempotent: the brain ignores a release from a non-holder."""
        await self.client.get_workflow_handle(c.brain_workflow_id(ask.principal)).signal(
            "release_turn", ask.turn.gate_id)

    @activity.defn(name=c.READ_COUNTER)
    def read_counter(self, inp: c.CounterInput) -> int:
        return self.registry.get(inp.principal).counter()

    @activity.defn(name=c.MIRROR_COUNTER)
    def mirror_counter(self, inp: c.CounterInput) -> int:
        return self.registry.get(inp.principal).raise_counter(inp.n)

    # -- gate ----------------------------------------------------------------

    @activity.defn(name=c.CONSULT)
    def consult(self, inp: c.ConsultInput) -> c.ConsultResult:
        """The whole consult path in one step, for predictors fast enough to run as a
        local activity: one dispatch instead of six. Reinforcement is keyed by
        (chunk, N), so a retry adds no trace."""
        result = consult(self.registry.get(inp.request.principal), self.predictor, inp.request, inp.n,
                         self.settings, now=inp.now, gate_key=inp.gate_key, dialog=inp.dialog,
                         working_memory=inp.working_memory, artifact=self._artifact(inp.request))
        return c.ConsultResult(prior=result.prior, posterior=result.posterior, surprise=result.surprise,
                               calibration=result.calibration)

    @activity.defn(name=c.RETRIEVE)
    def retrieve_context(self, inp: c.RetrieveInput) -> c.RetrievalBundle:
        memory = self.registry.get(inp.request.principal)
        artifact = self._artifact(inp.request)
        bundle = c.RetrievalBundle(
            prior=retrieve(memory, inp.request, inp.n, "prior", options=self.settings.retrieval),
            posterior=retrieve(memory, inp.request, inp.n, "posterior", artifact, self.settings.retrieval),
        )
        bundle.prior.working_memory = bundle.posterior.working_memory = inp.working_memory
        return bundle

    @activity.defn(name=c.PRIOR_PASS)
    def prior_pass(self, inp: c.PassInput) -> PassResult:
        return self.predictor.prior(inp.request, inp.ctx, inp.dialog)

    @activity.defn(name=c.POSTERIOR_PASS)
    def posterior_pass(self, inp: c.PassInput) -> PassResult:
        if inp.prior is None:
            raise ValueError("the posterior pass needs the prior")
        return self.predictor.posterior(inp.request, inp.ctx, self._artifact(inp.request), inp.prior, inp.dialog)

    @activity.defn(name=c.EXTRACT_SURPRISE)
    def extract_surprise(self, inp: c.SurpriseInput) -> Surprise:
        return self.predictor.surprise(
            inp.request, self._artifact(inp.request), inp.prior, inp.posterior, inp.ctx
        )

    @activity.defn(name=c.CALIBRATE)
    def calibrate(self, inp: c.CalibrateInput) -> Calibration:
        params = self.settings.calibration
        memory = self.registry.get(inp.request.principal)
        return calibrate(inp.confidence, calibration_inputs(
            memory, inp.request, inp.ctx, params, now=inp.now, gate_key=inp.gate_key), params)

    @activity.defn(name=c.REINFORCE)
    def reinforce(self, inp: c.ReinforceInput) -> list[str]:
        return self.registry.get(inp.principal).reinforce(inp.chunk_ids, inp.n)

    @activity.defn(name=c.AGENT_REPLY)
    def agent_reply(self, inp: c.AgentReplyInput) -> c.AgentReply:
        text, usage = self.predictor.agent_reply(inp.request, self._artifact(inp.request), inp.dialog)
        return c.AgentReply(text=text, usage=usage)

    @activity.defn(name=c.RECORD_OUTCOME)
    def record_outcome(self, record: OutcomeRecord) -> str:
        return record_outcome(self.registry.get(record.request.principal), record)
