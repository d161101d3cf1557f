"""The worker's learned models: versions fitted on the schedule under the turn, saved
beside the principal's memory, pinned by each gate, so a refit (or a new answer)
between two attempts of a gate's consult never changes that gate's decision."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.memory.registry import MemoryRegistry
from vicar.models import AnsweredBy, GateResult, GateStatus, HumanAnswer, ModelPin, OutcomeRecord
from vicar.proxy.learned_store import LearnedModels
from vicar.proxy.outcomes import record_outcome
from vicar.settings import MemoryParams

from .conftest import let_test_responders_in, wait_for
from .test_learned import EMPTY, synthetic


def _records(principal: str, n: int, seed: int = 0) -> list[OutcomeRecord]:
    out = []
    for r in synthetic(n, seed=seed):
        req = r.request.model_copy(update={"principal": principal, "gate_id": f"{principal}-{r.request.gate_id}"})
        out.append(r.model_copy(update={"request": req, "workflow_id": f"{principal}/{r.workflow_id}/{seed}"}))
    return out


def _decisions(models: LearnedModels, principal: str, pin: ModelPin | None, probes) -> list[tuple]:
    with models.using(principal, pin) as p:
        out = []
        for r in probes:
            post = p.posterior(r.request, EMPTY, "", p.prior(r.request, EMPTY))
            out.append((post.action, post.confidence, post.note))
        return out


def test_versions_on_the_schedule_and_a_pin_outlives_later_fits(tmp_path, embedder):
    principal = "ada"
    registry = MemoryRegistry(tmp_path, lambda: embedder, MemoryParams())
    records = _records(principal, 70)
    probes = _records(principal, 20, seed=5)
    try:
        memory = registry.get(principal)
        models = LearnedModels(registry)
        assert models.pin(principal) == ModelPin(version=None, answers=0, seq=0)  # the memory vote answers
        for r in records[:35]:
            record_outcome(memory, r, artifacts=False)
        pin = models.pin(principal)
        assert pin == ModelPin(version=30, answers=35, seq=35)
        assert models.versions(principal) == [30]
        assert (memory.dir / "models" / "v30.txt").is_file()
        before = _decisions(models, principal, pin, probes)
        assert all("learned model v30" in note for *_, note in before)

        # A proxy answer teaches nothing; 35 more human answers bring the v60 fit.
        record_outcome(
            memory,
            records[40].model_copy(update={"workflow_id": "proxy-x", "answered_by": AnsweredBy.proxy}),
            artifacts=False,
        )
        for r in records[35:]:
            record_outcome(memory, r, artifacts=False)
        newer = models.pin(principal)
        assert newer == ModelPin(version=60, answers=70, seq=71) and models.versions(principal) == [30, 60]
        # The old pin still decides as it did: same model, same history.
        assert _decisions(models, principal, pin, probes) == before
        assert all("learned model v60" in note for *_, note in _decisions(models, principal, newer, probes))
        # So does a new worker (a restart): the versions are on disk, the history in the log.
        assert _decisions(LearnedModels(registry), principal, pin, probes) == before
        # Consolidation fits on every answer so far, off the schedule.
        assert models.refit(principal) == ModelPin(version=70, answers=70, seq=71)
        assert models.refit(principal) == ModelPin(version=70, answers=70, seq=71)  # idempotent
    finally:
        registry.close()


class RefitBetweenAttempts(LearnedModels):
    """The first consult fails after a human answer lands and a refit is saved (as a
    worker lost mid-consult while the principal's memory moved on); the retry follows.
    Each attempt's pin, and what the retry actually predicted with, are kept."""

    def __init__(self, registry, extra: OutcomeRecord) -> None:
        super().__init__(registry)
        self.extra = extra
        self.pins: list[ModelPin | None] = []
        self.used: list[tuple[int | None, int]] = []  # (model version, history answers)

    @contextlib.contextmanager
    def using(self, principal, pin):
        self.pins.append(pin)
        if len(self.pins) == 1:
            record_outcome(self.registry.get(principal), self.extra, artifacts=False)
            self.refit(principal)
            raise RuntimeError("worker lost mid-consult")
        with super().using(principal, pin) as predictor:
            self.used.append((predictor.model.version if predictor.model else None, predictor.history.n))
            yield predictor


@pytest.mark.asyncio
async def test_a_refit_between_attempts_never_changes_the_gates_decision(temporal_env, embedder, settings):
    from vicar.worker import build_worker

    principal = f"p-{uuid.uuid4().hex[:8]}"
    let_test_responders_in(settings.principals_dir, principal)
    records = _records(principal, 31)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    memory = registry.get(principal)
    for r in records[:30]:
        record_outcome(memory, r, artifacts=False)
    models = RefitBetweenAttempts(registry, records[30])
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    worker, _ = build_worker(temporal_env.client, settings, predictor=models, registry=registry, task_queue=task_queue)
    probe = _records(principal, 1, seed=9)[0].request.model_copy(update={"gate_id": f"g-{uuid.uuid4().hex[:8]}"})
    try:
        async with worker:
            handle = await start_gate(temporal_env.client, probe, task_queue)
            details = await wait_for(lambda: _consulted(temporal_env.client, probe.gate_id), timeout=60)
            if details.status is GateStatus.escalated:
                await answer_gate(
                    temporal_env.client, probe.gate_id, HumanAnswer(action="approve", text="ok", responder="test")
                )
            result: GateResult = await handle.result()
        # Pinned under the turn before any consult: v30 on 30 answers. By the retry a
        # 31st answer and a v31 fit exist, and the retry still used the pin.
        assert models.pins == [ModelPin(version=30, answers=30, seq=30)] * 2
        assert models.versions(principal) == [30, 31]
        assert models.used == [(30, 30)]
        assert result.model_version == 30
        stored = [OutcomeRecord.model_validate_json(raw) for _, raw in memory.store.outcomes() if probe.gate_id in raw]
        assert len(stored) == 1 and stored[0].posterior.note.startswith("learned model v30")
    finally:
        registry.close()


async def _consulted(client, gate_id: str):
    d = await gate_details(client, gate_id)
    return d if d and d.status in (GateStatus.escalated, GateStatus.done) else None
