"""The worker's learned models: per principal, the answer history rebuilt from the
outcome log, and the fitted versions saved beside the principal's memory.

A gate pins one version (and the history it saw) under its brain turn, where the
refits that are due happen too; a retry of the gate's consult uses the same pin, so a
refit between two attempts never changes the gate's decision. Nothing here is needed
to rebuild: the log is the source of truth, the saved versions are a cache of fits
that are pure functions of it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from vicar.memory.registry import MemoryRegistry
from vicar.models import ModelPin, OutcomeRecord
from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.learned_history import History
from vicar.proxy.learned_model import Model, fit, refit_due
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.provider import Predictor
from vicar.proxy.team import KindCounts
from vicar.settings import PredictorParams

MODELS_DIR = "models"  # under the principal's memory directory
LOADED_VERSIONS = 2  # per principal: the pinned one and the one before, for a gate still deciding


class _Principal:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.history = History()
        self.last_seq = 0  # the outcome log's last seq folded into the history
        self.models: dict[int, Model] = {}


class LearnedModels(Predictor):
    """The Predictor the worker uses for the learned model: one per worker, a
    LearnedPredictor per principal and pin (see `using`). Abilities: using, pin,
    refit, forget. Its passes are the pinned LearnedPredictor's, reached through `using`."""

    name = "learned"
    local = True  # milliseconds per step: the consult runs as one local activity

    def __init__(
        self,
        registry: MemoryRegistry,
        params: PredictorParams | None = None,
        learner: str = "lightgbm",
        team: Callable[[str], KindCounts | None] | None = None,
    ) -> None:
        self.registry = registry
        # A principal's team's answers per kind of action (vicar.proxy.team_store), read at
        # each consult: the team prior's evidence. None: no teams.
        self.team = team
        self.params = params
        self.learner = learner
        self._principals: dict[str, _Principal] = {}
        self._lock = threading.Lock()
        # The memory vote under every principal's model: a pure function of the params.
        self.vote = OfflinePredictor(params)

    def directory(self, principal: str) -> Path:
        return self.registry.get(principal).dir / MODELS_DIR

    def forget(self, principal: str) -> None:
        """Drop the principal's history and loaded models (its memory moved away)."""
        with self._lock:
            self._principals.pop(principal, None)

    def _state(self, principal: str) -> _Principal:
        with self._lock:
            state = self._principals.get(principal)
            if state is None:
                state = self._principals[principal] = _Principal()
            return state

    def _catch_up(self, principal: str, state: _Principal) -> None:
        """Fold the outcomes recorded since the last look (any gate): the human's answers
        teach, the proxy's move their thread's last verdict."""
        store = self.registry.get(principal).store
        for seq, raw in store.outcomes(after_seq=state.last_seq):
            state.history.observe(OutcomeRecord.model_validate_json(raw))
            state.last_seq = seq

    def _history_at(self, principal: str, seq: int) -> History:
        """The history as it was up to the outcome log's `seq`: a retry after later
        outcomes landed must see what the first attempt saw."""
        history = History()
        for at, raw in self.registry.get(principal).store.outcomes():
            if at > seq:
                break
            history.observe(OutcomeRecord.model_validate_json(raw))
        return history

    def _pin(self, principal: str, state: _Principal) -> ModelPin:
        usable = [v for v in self.versions(principal) if v <= state.history.n]
        return ModelPin(version=usable[-1] if usable else None, answers=state.history.n, seq=state.last_seq)

    def versions(self, principal: str) -> list[int]:
        directory = self.directory(principal)
        return sorted(int(p.stem[1:]) for p in directory.glob("v*.json") if p.stem[1:].isdigit())

    def _save(self, principal: str, model: Model) -> None:
        """Written to a scratch directory and renamed into place: a crash mid-write never
        leaves a version half there (its .json marks it complete)."""
        directory = self.directory(principal)
        scratch = directory / f".v{model.version}.tmp"
        model.save(scratch)
        for name in (f"v{model.version}.txt", f"v{model.version}.json"):
            if (scratch / name).exists():
                (scratch / name).replace(directory / name)
        with contextlib.suppress(OSError):
            scratch.rmdir()

    def _fit_and_save(self, principal: str, state: _Principal, answers: int) -> None:
        model = fit(state.history, answers, self.learner)
        if model is not None:
            self._save(principal, model)
            state.models[model.version] = model

    def pin(self, principal: str) -> ModelPin:
        """Under the principal's turn: fit the scheduled version if it is due and not
        saved yet, then pin the newest saved version and the current history."""
        state = self._state(principal)
        with state.lock:
            self._catch_up(principal, state)
            scheduled = _last_scheduled(state.history.n)
            if scheduled and scheduled not in self.versions(principal):
                self._fit_and_save(principal, state, scheduled)
            return self._pin(principal, state)

    def refit(self, principal: str) -> ModelPin:
        """At consolidation: a version on every answer so far, schedule or not."""
        state = self._state(principal)
        with state.lock:
            self._catch_up(principal, state)
            n = state.history.n
            if n and n not in self.versions(principal):
                self._fit_and_save(principal, state, n)
        return self.pin(principal)

    def _model(self, principal: str, state: _Principal, version: int | None) -> Model | None:
        if version is None:
            return None
        model = state.models.get(version)
        if model is None:
            model = Model.load(self.directory(principal), version)
            if model is None:
                # Saved with another feature list: fitted again from the log (the first
                # `version` human answers' rows are the same in any later history).
                model = fit(state.history, version, self.learner)
            if model is not None:  # None: no answers to fit on, nothing to keep
                state.models[version] = model
        for old in sorted(state.models)[:-LOADED_VERSIONS]:
            if old != version:
                del state.models[old]
        return model

    @contextlib.contextmanager
    def using(self, principal: str, pin: ModelPin | None) -> Iterator[LearnedPredictor]:
        """The principal's predictor as pinned (the latest history and version when
        there is no pin), held exclusively while the caller predicts."""
        state = self._state(principal)
        with state.lock:
            self._catch_up(principal, state)
            pin = pin or self._pin(principal, state)
            history = state.history if pin.seq == state.last_seq else self._history_at(principal, pin.seq)
            model = self._model(principal, state, pin.version)
            yield LearnedPredictor(
                self.params,
                history,
                learner=self.learner,
                auto_refit=False,
                vote=self.vote,
                model=model,
                team=self.team(principal) if self.team else None,
            )


def _last_scheduled(n: int) -> int | None:
    """The newest refit point at or below n answers."""
    for k in range(n, 0, -1):
        if refit_due(k):
            return k
    return None
