"""The consolidation's activities, on the memory's shard: one session's new memories
planned, then the plan applied (heartbeating). Each is idempotent."""

from __future__ import annotations

from temporalio import activity

from vicar import contracts as c
from vicar.memory.chunk import chunk_id_for
from vicar.memory.consolidation import apply_consolidation, plan_consolidation
from vicar.memory.consolidation_plan import ConsolidationPlan, ConsolidationReport
from vicar.memory.registry import MemoryRegistry
from vicar.models.session import ConsolidationInput
from vicar.proxy import facts
from vicar.proxy.provider import Predictor
from vicar.settings import Settings


class ConsolidationActivities:
    def __init__(self, registry: MemoryRegistry, settings: Settings, predictor: Predictor | None = None) -> None:
        # An LLM predictor's judge_conflict settles ambiguous disagreements; offline,
        # they are kept as context sensitivity.
        self.judge = predictor.judge_conflict if predictor else None
        # ... and reads the human's preferences from their answers; offline, the concern
        # words they repeat do.
        self.extractor = predictor.extract_preferences if predictor else None
        # A learned model refits at consolidation too, under the same turn.
        self.refit = predictor.refit if predictor else None
        self.registry = registry
        self.settings = settings

    def memory(self) -> list:
        return [self.plan_consolidation, self.apply_consolidation]

    @activity.defn(name=c.PLAN_CONSOLIDATION)
    def plan_consolidation(self, inp: ConsolidationInput) -> ConsolidationPlan:
        memory = self.registry.get(inp.principal)
        chunk_ids = [chunk_id_for(inp.principal, wid) for wid in inp.gate_workflow_ids]
        return plan_consolidation(memory, inp.session_id, chunk_ids, judge=self.judge)

    @activity.defn(name=c.APPLY_CONSOLIDATION)
    def apply_consolidation(self, inp: c.ApplyInput) -> ConsolidationReport:
        memory = self.registry.get(inp.principal)
        report = apply_consolidation(memory, inp.plan, on_step=activity.heartbeat)
        report.facts_learned = len(facts.after_consolidation(memory, inp.plan, self.settings.facts, self.extractor))
        report.buffer_kept, report.buffer_dropped = memory.settle_buffer()
        if self.refit:
            try:
                self.refit(inp.principal)
            except Exception as exc:  # the schedule refits later; the consolidation stands
                activity.logger.warning("refit of %s at consolidation failed: %s", inp.principal, exc)
        return report
