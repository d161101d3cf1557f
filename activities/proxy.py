"""The gate's activities (the brain's turn and counter: activities/turns.py). Each is
idempotent: Temporal may run it again.

They are synchronous and run in the worker's thread pool, so blocking I/O (SQLite,
Chroma, the embedding model) never runs on the event loop.
"""

from __future__ import annotations

import collections
from collections.abc import Collection

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.activities import answers
from vicar.activities.rules import RuleActivities
from vicar.activities.store_errors import store_errors
from vicar.activities.turns import TurnActivities
from vicar.artifacts import load_artifact
from vicar.errors import ARTIFACT_REFUSED, ArtifactRefused
from vicar.memory.registry import MemoryRegistry
from vicar.models import BrainConfig, Calibration, ModelPin, OutcomeRecord, PassResult, Surprise
from vicar.proxy.audit_trail import log_unanswered
from vicar.proxy.calibration import calibrate, calibration_inputs
from vicar.proxy.consult import consult
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.provider import Predictor, predicting
from vicar.proxy.retrieval import contexts
from vicar.proxy.team_store import share_outcome
from vicar.settings import TASK_QUEUE, Settings


class ProxyActivities(TurnActivities, RuleActivities):
    def __init__(
        self,
        client: Client,
        registry: MemoryRegistry,
        predictor: Predictor,
        settings: Settings,
        brain_config: BrainConfig | None = None,
        task_queue: str = TASK_QUEUE,
        served_shards: Collection[int] | None = None,
    ) -> None:
        self.client = client
        self.registry = registry
        self.predictor = predictor
        self.settings = settings
        # The deployment's sharding goes to every brain this worker starts.
        self.brain_config = (brain_config or BrainConfig()).model_copy(
            update=dict(shard_count=settings.shard_count, shard_wait_seconds=settings.shard_wait_seconds)
        )
        self.task_queue = task_queue
        self._served = frozenset(served_shards or ())
        self._turn_updates: collections.Counter[str] = collections.Counter()  # per principal, this process

    def _artifact(self, request) -> str:
        try:
            return load_artifact(request, self.settings)
        except ArtifactRefused as exc:
            # No retry makes a refused path readable: the gate goes to the human at once,
            # with the reason (guard proxy_error).
            raise ApplicationError(str(exc), type=ARTIFACT_REFUSED, non_retryable=True) from None

    def all(self) -> list:
        return self.shared() + self.memory()

    def shared(self) -> list:
        """Client calls only: on the shared queue, any worker."""
        return [self.request_turn, self.release_turn]

    def memory(self) -> list:
        """Everything that reads or writes a principal's memory (records, vectors, model,
        allow-list): on the shard's queue when sharded."""
        return [
            self.read_counter,
            self.advance_turn,
            self.consult,
            self.retrieve_context,
            self.prior_pass,
            self.posterior_pass,
            self.extract_surprise,
            self.calibrate,
            self.reinforce,
            self.agent_reply,
            self.record_outcome,
            self.record_unanswered,
            self.pin_model,
            self.vet_answer,
            self.recorded_outcome,
            self.look_up_and_pin,
            self.match_rules,
            self.keep_control,
            self.load_control,
        ]

    def _predicting(self, principal: str, pin: ModelPin | None = None):
        """The predictor for one principal, held while the step predicts."""
        return predicting(self.predictor, principal, pin)

    # -- gate ----------------------------------------------------------------

    @activity.defn(name=c.CONSULT)
    @store_errors
    def consult(self, inp: c.ConsultInput) -> c.ConsultResult:
        """The whole consult path in one step, for predictors fast enough to run as a
        local activity: one dispatch instead of six. Reinforcement is keyed by
        (chunk, N), so a retry adds no trace."""
        result = consult(
            self.registry.get(inp.request.principal),
            self.predictor,  # held for the principal, as the gate pinned it, while it predicts
            inp.request,
            inp.n,
            self.settings,
            now=inp.now,
            gate_key=inp.gate_key,
            dialog=inp.dialog,
            working_memory=inp.working_memory,
            artifact=self._artifact(inp.request),
            pin=inp.model,
        )
        return c.ConsultResult(
            prior=result.prior,
            posterior=result.posterior,
            surprise=result.surprise,
            calibration=result.calibration,
            lineage=result.posterior_context.lineage_history,
        )

    @activity.defn(name=c.RETRIEVE)
    @store_errors
    def retrieve_context(self, inp: c.RetrieveInput) -> c.RetrievalBundle:
        memory = self.registry.get(inp.request.principal)
        artifact = self._artifact(inp.request)
        prior, posterior = contexts(memory, inp.request, inp.n, artifact, self.settings, inp.working_memory)
        return c.RetrievalBundle(prior=prior, posterior=posterior)

    @activity.defn(name=c.PRIOR_PASS)
    def prior_pass(self, inp: c.PassInput) -> PassResult:
        with self._predicting(inp.request.principal) as predictor:
            return predictor.prior(inp.request, inp.ctx, inp.dialog)

    @activity.defn(name=c.POSTERIOR_PASS)
    def posterior_pass(self, inp: c.PassInput) -> PassResult:
        if inp.prior is None:
            raise ValueError("the posterior pass needs the prior")
        artifact = self._artifact(inp.request)
        with self._predicting(inp.request.principal) as predictor:
            return predictor.posterior(inp.request, inp.ctx, artifact, inp.prior, inp.dialog)

    @activity.defn(name=c.EXTRACT_SURPRISE)
    def extract_surprise(self, inp: c.SurpriseInput) -> Surprise:
        artifact = self._artifact(inp.request)
        with self._predicting(inp.request.principal) as predictor:
            return predictor.surprise(inp.request, artifact, inp.prior, inp.posterior, inp.ctx)

    @activity.defn(name=c.CALIBRATE)
    @store_errors
    def calibrate(self, inp: c.CalibrateInput) -> Calibration:
        params = self.settings.calibration
        memory = self.registry.get(inp.request.principal)
        inputs = calibration_inputs(
            memory,
            inp.request,
            inp.ctx,
            params,
            now=inp.now,
            gate_key=inp.gate_key,
            action=inp.action,
            artifact=self._artifact(inp.request),
        )
        return calibrate(inp.confidence, inputs, params)

    @activity.defn(name=c.REINFORCE)
    @store_errors
    def reinforce(self, inp: c.ReinforceInput) -> list[str]:
        return self.registry.get(inp.principal).reinforce(inp.chunk_ids, inp.n)

    @activity.defn(name=c.AGENT_REPLY)
    def agent_reply(self, inp: c.AgentReplyInput) -> c.AgentReply:
        artifact = self._artifact(inp.request)
        with self._predicting(inp.request.principal) as predictor:
            text, usage = predictor.agent_reply(inp.request, artifact, inp.dialog)
        return c.AgentReply(text=text, usage=usage)

    @activity.defn(name=c.RECORD_OUTCOME)
    @store_errors
    def record_outcome(self, record: OutcomeRecord) -> str:
        artifact = None
        if record.request.artifact_paths:
            # Hashed for "changed since": the files as they are when the answer lands
            # (what the human judged). Files that can no longer be read leave the hash
            # unknown; they must not keep the outcome from being recorded.
            try:
                artifact = load_artifact(record.request, self.settings)
            except ArtifactRefused:
                pass
        chunk_id = record_outcome(
            self.registry.get(record.request.principal),
            record,
            artifact=artifact,
            params=self.settings.calibration,
            facts=self.settings.facts,
        )
        # What crosses to the person's team, if they are in one: counts and a draw, no content.
        share_outcome(self.settings.data_dir, record)
        return chunk_id

    @activity.defn(name=c.RECORD_UNANSWERED)
    @store_errors
    def record_unanswered(self, record: OutcomeRecord) -> bool:
        return log_unanswered(self.registry.get(record.request.principal).store, record)

    @activity.defn(name=c.PIN_MODEL)
    @store_errors
    def pin_model(self, principal: str) -> ModelPin | None:
        """Run under the gate's turn: the refit that is due happens here (so no gate of
        the principal decides meanwhile), and the gate keeps the version it got.
        None for a predictor without versions (offline, an LLM)."""
        return self.predictor.pin(principal) if self.predictor.pin else None

    @activity.defn(name=c.VET_ANSWER)
    async def vet_answer(self, vet: c.AnswerVet) -> c.AnswerVerdict:
        """Read-only: the allow-list now and the answer's caller identity from history."""
        return await answers.vet(self.client, self.settings.principals_dir, self.settings.require_identity_match, vet)

    @activity.defn(name=c.RECORDED_OUTCOME)
    @store_errors
    def recorded_outcome(self, lookup: c.OutcomeLookup) -> OutcomeRecord | None:
        """Read-only: the outcome already recorded under this gate's workflow id."""
        raw = self.registry.get(lookup.principal).store.outcome_record(lookup.workflow_id)
        return OutcomeRecord.model_validate_json(raw) if raw else None

    @activity.defn(name=c.LOOK_UP_AND_PIN)
    @store_errors
    def look_up_and_pin(self, lookup: c.OutcomeLookup) -> c.LookupAndPin:
        """RECORDED_OUTCOME, then (nothing recorded) PIN_MODEL, in one dispatch, under
        the gate's turn. Idempotent like both: the lookup reads, the pin fits at most
        what is due."""
        earlier = self.recorded_outcome(lookup)
        if earlier is not None:
            return c.LookupAndPin(outcome=earlier)
        return c.LookupAndPin(pinned=True, pin=self.pin_model(lookup.principal))
