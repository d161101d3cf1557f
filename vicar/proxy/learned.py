"""The learned predictor: a per-principal gradient-boosted model over the human's own
answer history, wrapped around the memory vote.

A reviewer's next verdict is mostly their last verdict on the same lineage (a topic
branch, a patch and its rerolls) and whether the artifact changed since; the memory
vote alone does not see either. So each principal keeps an online history of human
answers (per lineage the last verdicts, their words and the artifact at each; per
context and upstream agent the base rates of each action) and a LightGBM model over
features of that history, the request's structure and the memory vote, refitted on a
fixed schedule. Until the first fit the memory vote answers.

The model is a pure function of the outcome log up to an answer count: a history is
rebuilt by replaying the human answers in log order (each record's posterior keeps the
memory-vote features the gate saw), and the fit is seeded and single-threaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from vicar.models import (
    Action,
    DialogTurn,
    GateRequest,
    OutcomeRecord,
    PassResult,
    RequestKind,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.models.vocabulary import TERMINAL_ACTIONS
from vicar.proxy.answer_words import DEFAULT_TEXT, with_prereview
from vicar.proxy.choose import to_features
from vicar.proxy.learned_history import History, memory_features
from vicar.proxy.learned_model import Model, fit, refit_due
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.provider import Predictor
from vicar.proxy.team import KindCounts, team_to_features
from vicar.proxy.team import estimate as team_estimate
from vicar.settings import PredictorParams

# -- the predictor --------------------------------------------------------------------


class LearnedPredictor(Predictor):
    """The Predictor interface over the learned model, the memory vote underneath.
    Abilities: observe (a replay feeds it each answer)."""

    name = "learned"
    local = True  # milliseconds per step, like the offline predictor

    def __init__(
        self,
        params: PredictorParams | None = None,
        history: History | None = None,
        learner: str = "lightgbm",
        auto_refit: bool = True,
        vote: OfflinePredictor | None = None,
        model: Model | None = None,
        team: KindCounts | None = None,
        choose: bool = True,
    ) -> None:
        # The memory vote (`vote`: one shared, it keeps nothing between calls).
        self.vote = vote if vote is not None else OfflinePredictor(params)
        self.trust_feature = (params or PredictorParams()).trust_feature
        self.history = history or History()
        self.learner = learner
        self.auto_refit = auto_refit  # False: a caller (an activity) decides when to fit
        self.model = model
        # The other members' answers per kind of action (vicar.proxy.team); None: no team.
        self.team = team
        # Weigh the memory vote, the model and the team prior by their log-loss so far
        # (vicar.proxy.choose). False: the memory vote until the first fit, the model after
        # (as before the chooser; a replay's baseline).
        self.choose = choose

    @classmethod
    def from_log(
        cls, rows: Iterable[tuple[int, str]], params: PredictorParams | None = None, **kw
    ) -> "LearnedPredictor":
        """From a principal's outcome log (`RecordStore.outcomes(answered_by="human")`),
        fitted as it would have been online at the last scheduled count."""
        predictor = cls(params, History.from_records(OutcomeRecord.model_validate_json(r) for _, r in rows), **kw)
        scheduled = [k for k in range(1, predictor.history.n + 1) if refit_due(k)]
        if scheduled:
            predictor.model = fit(predictor.history, scheduled[-1], predictor.learner)
        return predictor

    # -- the Predictor interface -------------------------------------------------------

    def prior(self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()) -> PassResult:
        return self._predict(request, ctx)

    def posterior(
        self,
        request: GateRequest,
        ctx: RetrievalContext,
        artifact: str,
        prior: PassResult,
        dialog: Sequence[DialogTurn] = (),
    ) -> PassResult:
        # The action is the model's; the words for it are the pre-review's (answer_words).
        return with_prereview(self._predict(request, ctx), request, ctx, artifact, dialog)

    def surprise(
        self, request: GateRequest, artifact: str, prior: PassResult, posterior: PassResult, ctx: RetrievalContext
    ) -> Surprise:
        return self.vote.surprise(request, artifact, prior, posterior, ctx)

    def agent_reply(
        self, request: GateRequest, artifact: str, dialog: Sequence[DialogTurn]
    ) -> tuple[str, Usage | None]:
        return self.vote.agent_reply(request, artifact, dialog)

    # -- learning ------------------------------------------------------------------

    def refit_due(self, n_answers: int | None = None) -> bool:
        return refit_due(self.history.n if n_answers is None else n_answers)

    def fit(self, n_answers: int | None = None) -> Model | None:
        self.model = fit(self.history, n_answers, self.learner)
        return self.model

    def observe(self, record: OutcomeRecord) -> None:
        """One recorded outcome; refits when the schedule says so (unless auto_refit=False)."""
        if self.history.observe(record) and self.auto_refit and refit_due(self.history.n):
            self.fit()

    def save(self, directory: Path) -> Path | None:
        return self.model.save(directory) if self.model else None

    def load(self, directory: Path, version: int | None = None) -> Model | None:
        self.model = Model.load(directory, version)
        return self.model

    # -- internals ----------------------------------------------------------------

    def _predict(self, request: GateRequest, ctx: RetrievalContext) -> PassResult:
        # Each module's part is asked for in one go (the memory vote's, the history's, the
        # model's, the team's, the chooser's): the same answers, a walk that reads straight
        # through (bench/consult_walk.py).
        # The model reads the memory as a split retrieval found it, whatever a small memory's
        # retrieval borrowed from other task types (retrieval.SMALL_HISTORY): its features
        # mean the same at every size.
        own = _within_task(ctx, request)
        vote = self.vote.prior(request, ctx)
        split = vote if own is ctx else self.vote.prior(request, own)
        choosing = request.kind is RequestKind.gate and self.choose
        voted = self.vote.distribution(ctx) if choosing else {}
        memory = memory_features(split, own, request.artifact_text, trust=self.trust_feature)
        vote.features = memory
        if request.kind is not RequestKind.gate:
            return vote  # questions: the memory vote answers
        if not self.choose:
            return self._fixed(request, vote, memory)
        # Each candidate's distribution over actions, kept in the features: the log-loss
        # of each is rebuilt from the outcome log (History.observe).
        candidates: dict[str, dict[str, float]] = {}
        if voted:
            candidates["vote"] = voted
        row = self.history.features(request, memory)
        words = self.history.words(request, TERMINAL_ACTIONS)
        if self.model is not None:
            candidates["model"] = {a.value: float(p) for a, p in zip(self.model.classes, self.model.proba(row)[0])}
        estimate = team_estimate(request, self.history.own, self.team)
        team_features: dict[str, float] = {}
        if estimate is not None:
            if estimate.has_team:
                candidates["team"] = estimate.actions()
            team_features = team_to_features(estimate.team)
            # the wish to be asked, per action (the replay's lone-answer figures)
            team_features |= {f"ask:{a}": round(estimate.asked(a), 6) for a in estimate.actions()}
        features = {**memory, **to_features(candidates), **team_features}
        if set(candidates) <= {"vote"}:
            # The memory vote alone (or nothing): its own answer, as before the chooser.
            wants = estimate.asked(vote.action.value) if estimate and vote.action else None
            return vote.model_copy(update={"features": features, "wants_asked": wants})
        mixed, weights = self.history.chooser.mix(candidates)
        parts = [self.history.chooser.summary(weights)]
        features |= {f"mix:{a}": round(p, 6) for a, p in mixed.items()}
        gate_actions = {a: p for a, p in mixed.items() if a in _GATE_ACTIONS}
        # Ties break toward the more cautious action, as the memory vote's do.
        action = Action(max(gate_actions, key=lambda a: (gate_actions[a], -_CAUTION.get(a, 99))))
        prose = words[action] or (vote.prose if vote.action is action else DEFAULT_TEXT.get(action, ""))
        if self.model is not None:
            parts[0] = parts[0].replace("learned model", f"learned model v{self.model.version} ({self.learner})")
        if estimate is not None and estimate.sentence:
            parts.append(estimate.sentence)
        wants = estimate.asked(action.value) if estimate else None
        if wants is not None and wants >= 0.5:
            parts.append(f"you usually want to be asked first here ({wants:.0%})")
        return PassResult(
            prose=prose,
            confidence=round(min(1.0, gate_actions[action.value]), 4),
            action=action,
            tap=likeliest_tap([Action(a) for a in gate_actions], list(gate_actions.values())),
            note="; ".join(parts),
            used_chunk_ids=vote.used_chunk_ids,
            features=features,
            wants_asked=None if wants is None else round(wants, 4),
        )

    def _fixed(self, request: GateRequest, vote: PassResult, memory: dict[str, float]) -> PassResult:
        """The memory vote until the first fit, the model after: the predictor before the
        chooser and the team prior."""
        if self.model is None:
            return vote
        # The history's part first (the feature row, the human's words for each action
        # the model can answer), then the model scores the row once.
        row = self.history.features(request, memory)
        words = self.history.words(request, self.model.classes)
        probs = self.model.proba(row)[0]
        best = int(np.argmax(probs))
        action = self.model.classes[best]
        prose = words[action] or (vote.prose if vote.action is action else DEFAULT_TEXT.get(action, ""))
        return PassResult(
            prose=prose,
            confidence=round(float(probs[best]), 4),
            action=action,
            tap=likeliest_tap(self.model.classes, probs),
            note=f"learned model v{self.model.version} ({self.learner}); memory vote "
            f"{vote.action.value if vote.action else 'none'} at {vote.confidence:.2f}",
            used_chunk_ids=vote.used_chunk_ids,
            features=memory,
        )


def _within_task(ctx: RetrievalContext, request: GateRequest) -> RetrievalContext:
    """`ctx` with only the memories of the gate's own task type: what a split retrieval
    found, where a small memory's borrowed the person's answers on other task types."""
    kept = [c for c in ctx.chunks if c.task_type == request.task_type]
    return ctx if len(kept) == len(ctx.chunks) else ctx.model_copy(update={"chunks": kept})


_GATE_ACTIONS = frozenset(a.value for a in TERMINAL_ACTIONS)
_CAUTION = {
    a.value: i for i, a in enumerate([Action.reject, Action.correct, Action.hold, Action.withdraw, Action.approve])
}


# The answers a person can give in one tap: everything but `correct`, whose changes they
# still write (and `dialog`, which is a question, not an answer).
ONE_TAP = frozenset({Action.approve, Action.reject, Action.hold, Action.withdraw})


def likeliest_tap(classes: Sequence[Action], probs: Sequence[float]) -> Action | None:
    """The likeliest answer that needs no words: the one-tap button's. Offering the model's
    own likeliest action instead loses the tap whenever that is `correct`, and the person's
    habit beat it (docs/knowing-the-person.md)."""
    taps = [(float(p), a) for a, p in zip(classes, probs) if a in ONE_TAP]
    return max(taps, key=lambda t: t[0])[1] if taps else None
