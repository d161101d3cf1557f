"""Replay: run the proxy over each reviewer's gates in order, with a fresh memory,
consulting it before looking at the answer, then recording the human's real answer
exactly as an escalated gate would.

The proxy variants run the same `consult` path as the gate's activities; the baselines
(majority action, the old EMA gate) are the simplest predictors worth beating.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vicar.eval.dataset import GateEvent, principal_for
from vicar.eval.metrics import BASELINE_THRESHOLD, Prediction
from vicar.eval.profile import EvalProfile
from vicar.eval.team_baselines import TEAM_BASELINES, rule_kind
from vicar.memory.chunk import blended_text, chunk_id_for
from vicar.memory.embedder import Embedder
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, OutcomeRecord
from vicar.proxy.consult import consult
from vicar.proxy.facts import learn as learn_facts
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.outcome_log import regrets
from vicar.proxy.outcomes import outcome_chunk, record_outcome
from vicar.proxy.prereview import TURNED_BACK, RankLearner, pre_review, rank, render, select
from vicar.proxy.retrieval import build_query
from vicar.proxy.team import KindCounts, kinds_of, lone_answer, outcome_of
from vicar.settings import MemoryParams, RetrievalOptions, Settings

Progress = Callable[[int], None]  # called with the number of gates just replayed
# The dataset has no sessions: every this many gates, the replay does what consolidation
# does at a session's end: learn facts from the contexts those gates touched, and
# settle the storage decision's buffer.
SESSION_GATES = 50


NEVER = 2.0  # a fixed threshold no confidence reaches


class Variant(BaseModel):
    # A misspelt switch must not run the default silently.
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Literal["proxy", "majority", "ema", "team-majority", "prior-bias"] = "proxy"
    # or "learned" (the learned model, the memory vote and the team prior weighed by their
    # log-loss), "learned-fixed" (the memory vote until the model's first fit, the model
    # after), or an LLM provider: "anthropic", "openai"
    predictor: str = "offline"
    team: bool = True  # the team prior from the earlier members of the reviewer's team, if any
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    memory: MemoryParams = Field(default_factory=MemoryParams)
    # The old way, as a baseline: answer alone whenever the (guard-capped) confidence
    # reaches this, whatever the autonomy rule says.
    fixed_threshold: float | None = None
    # The mechanisms switched against the shipped values (a mechanism off, or swept
    # against the shipped default in the same run).
    profile: EvalProfile = Field(default_factory=EvalProfile)
    seed: int = Field(0, ge=0)  # the replay's draws (dataset.principal_for)


def standard_variants(base: MemoryParams | None = None) -> list[Variant]:
    """The baselines and ablations the design asks for, in one run. `default` is the
    configuration the product ships with."""
    m = base or MemoryParams()
    return [
        Variant(name="majority", kind="majority"),
        Variant(name="ema-gate", kind="ema"),
        # What the product ships: the learned model (the memory vote until its first fit)
        # under the autonomy rule.
        Variant(name="default", predictor="learned", memory=m),
        # The default without the team prior, and the predictor before the weighing by
        # log-loss (the model after its first fit, the memory vote before), no team.
        Variant(name="no-team", predictor="learned", memory=m, team=False),
        Variant(name="fixed-switch", predictor="learned-fixed", memory=m, team=False),
        # Baselines for teams: the team's most frequent answer on the same kind of action,
        # and a population prior with a per-person bias (vicar/eval/team_baselines.py).
        Variant(name="team-majority", kind="team-majority"),
        Variant(name="prior-bias", kind="prior-bias"),
        Variant(name="no-probation", predictor="learned", memory=m, profile=EvalProfile(probation_answers=0)),
        Variant(name="regret", predictor="learned", memory=m, profile=EvalProfile(regret_window=100)),
        Variant(name="no-trust-floor", predictor="learned", memory=m, profile=EvalProfile(trust_floor=0.0)),
        Variant(name="trust-feature", predictor="learned", memory=m, profile=EvalProfile(trust_feature=True)),
        Variant(name="censors", predictor="learned", memory=m, profile=EvalProfile(censor_min=3)),
        Variant(name="no-preferences", predictor="learned", memory=m, profile=EvalProfile(preferences=False)),
        Variant(name="no-procedures", predictor="learned", memory=m, profile=EvalProfile(procedures=False)),
        Variant(name="storage", predictor="learned", memory=m, profile=EvalProfile(storage=True)),
        Variant(name="composite", memory=m),  # the memory vote alone, under the same rule
        Variant(name="composite@0.8", memory=m, fixed_threshold=BASELINE_THRESHOLD),
        # Never alone: every gate goes to the human, so every gate is a labelled pair; its
        # gates file is the stream bench/autonomy_bound_bench.py simulates rules over.
        Variant(name="never-alone", predictor="learned", memory=m, fixed_threshold=NEVER),
        Variant(name="learned@0.8", predictor="learned", memory=m, fixed_threshold=BASELINE_THRESHOLD),
        Variant(name="activation-only", retrieval=RetrievalOptions(mode="activation"), memory=m),
        Variant(name="similarity-only", retrieval=RetrievalOptions(mode="similarity"), memory=m),
        Variant(name="recency-n", retrieval=RetrievalOptions(mode="recency"), memory=m),
        Variant(
            name="blended",
            retrieval=RetrievalOptions(embedding="blended"),
            memory=m.model_copy(update={"blended_vectors": True}),
        ),
        Variant(name="composite+lexical", retrieval=RetrievalOptions(lexical=True), memory=m),
    ]


LOCAL_PREDICTORS = ("offline", "learned", "learned-fixed")  # no paid calls


def make_predictor(name: str, settings: Settings, team: KindCounts | None = None):
    """`team`: the earlier members' answers per kind of action (the learned predictor's
    team prior)."""
    if name == "offline":
        return OfflinePredictor(settings.predictor)
    if name in ("learned", "learned-fixed"):
        from vicar.proxy.learned import LearnedPredictor

        return LearnedPredictor(settings.predictor, team=team, choose=name == "learned")
    from vicar.proxy.llm_predictor import LLMPredictor

    return LLMPredictor.from_env(name)


def event_texts(events: list[GateEvent]) -> list[str]:
    """Every text the replay will embed for the gates and the human answers, built by
    the functions the consult path and the store use (so the warm cache has exactly
    what they ask for), for one batched pass. Not known in advance: the proxy's own
    answers and surprise descriptions, embedded when they happen."""
    out: list[str] = []
    for e in events:
        request = e.request(principal_for(e.reviewer))
        for phase in ("prior", "posterior"):
            texts = build_query(request, 0, phase, request.artifact_text).texts
            out.extend(texts.values())
            out.append(blended_text(texts))  # the blended-embedding ablation's query
        chunk = outcome_chunk(
            OutcomeRecord(
                request=request,
                n=1,
                workflow_id=e.gate_id,
                action=e.action,
                response_text=e.response,
                answered_by=AnsweredBy.human,
            )
        )
        out.extend(chunk.vector_texts().values())
    return list(dict.fromkeys(t for t in out if t.strip()))


def replay_reviewer(
    events: list[GateEvent],
    variant: Variant,
    embedder: Embedder,
    settings: Settings,
    progress: Progress | None = None,
    predictor=None,
    inspect: Callable[[PrincipalMemory], None] | None = None,
    team: KindCounts | None = None,
) -> list[Prediction]:
    """`predictor`: an instance to use (and inspect afterwards) instead of a new one;
    `inspect`: called with the memory at the end, before it is thrown away; `team`: the
    earlier members' answers per kind of action, all that crosses from them."""
    if variant.kind == "majority":
        return _majority(events, progress)
    if variant.kind == "ema":
        return _ema_gate(events, progress)
    if variant.kind in TEAM_BASELINES:
        return TEAM_BASELINES[variant.kind](events, team, progress)
    principal = principal_for(events[0].reviewer if events else "reviewer", variant.seed)
    run_settings = variant.profile.apply(
        settings.model_copy(update={"retrieval": variant.retrieval, "memory": variant.memory})
    )
    predictor = predictor or make_predictor(variant.predictor, run_settings, team if variant.team else None)
    observe = predictor.observe  # a learning predictor sees each answer
    preds: list[Prediction] = []
    touched: set[tuple[str, str]] = set()
    ranker = RankLearner()  # the pre-review's ranking, learned online from this reviewer
    with tempfile.TemporaryDirectory(prefix="vicar-replay-") as tmp:
        memory = PrincipalMemory(principal, Path(tmp), embedder, run_settings.memory, throwaway=True)
        try:
            for i, event in enumerate(events):
                n = i + 1
                request = event.request(principal)
                # The proxy sees the gate, never the answer, before it predicts.
                c = consult(memory, predictor, request, n, run_settings)
                # A dialog line is no answer: the replay has no agents to talk to, so the
                # human decides, as at the dialog bound.
                alone = not c.decision.escalate and c.decision.action not in (None, Action.dialog)
                scored = rank(c.posterior_context, request, request.artifact_text, ranker.weights)
                answer = (c.decision.action, c.decision.text)
                if variant.fixed_threshold is not None:
                    action = c.posterior.action
                    alone = action not in (None, Action.dialog) and c.calibration.confidence >= variant.fixed_threshold
                    answer = (action, c.posterior.prose)
                lone = lone_answer(c.posterior)
                preds.append(
                    Prediction(
                        seq=event.seq,
                        task_type=event.task_type,
                        kind=rule_kind(request),
                        split=event.split,
                        ask_first=event.ask_first,
                        wants_asked=c.posterior.wants_asked,
                        alone_action=lone[0] if lone else None,
                        alone_score=lone[1] if lone else None,
                        supported=c.calibration.supported,
                        actual=event.action.value,
                        predicted=c.posterior.action.value if c.posterior.action else None,
                        suggested=c.posterior.tap.value if c.posterior.tap else None,
                        confidence=c.calibration.confidence,
                        prior_confidence=c.prior.confidence,
                        posterior_confidence=c.posterior.confidence,
                        autonomous=alone,
                        predicted_text=c.posterior.prose,
                        # What the person said before that bears on this artifact, from the
                        # context the posterior saw: built before the answer is looked at.
                        prereview_text=render(pre_review(c.posterior_context, request, request.artifact_text)),
                        prereview_learned_text=render(select(scored)),
                        actual_text=event.response,
                        surprise=c.surprise is not None,
                        surprise_percepts=c.surprise.percepts if c.surprise else [],
                        prior_predicted=c.prior.action.value if c.prior.action else None,
                        cost_usd=sum(
                            u.cost_usd
                            for u in (c.prior.usage, c.posterior.usage, c.surprise.usage if c.surprise else None)
                            if u
                        ),
                        fired=c.calibration.fired,
                        # The bound the rule stated (a fixed threshold states none).
                        bound=(
                            c.calibration.bound
                            if c.calibration.threshold is not None and variant.fixed_threshold is None
                            else None
                        ),
                    )
                )
                # Then the gate is stored as the product stores it: the human's real answer
                # when it escalated (a pair for the autonomy rule), the proxy's own answer
                # when it acted alone (no pair, no evidence: the rule never peeks at the
                # answers it did not ask for; Prediction.actual still scores it). A learning
                # predictor sees the record too, and learns only from human answers. The
                # dataset has no clock, so the staleness guard is not judged in a replay.
                outcome: dict[str, object]
                if alone:
                    outcome = dict(action=answer[0], response_text=answer[1], answered_by=AnsweredBy.proxy)
                else:
                    outcome = dict(
                        action=event.action,
                        response_text=event.response,
                        answered_by=AnsweredBy.human,
                        responder=event.reviewer,
                        ask_first=event.ask_first,
                    )
                record = OutcomeRecord(
                    request=request,
                    n=n,
                    workflow_id=f"replay/{event.gate_id}",
                    **outcome,
                    prior=c.prior,
                    posterior=c.posterior,
                    surprise=c.surprise,
                    calibration=c.calibration,
                )
                record_outcome(
                    memory, record, artifacts=False, params=run_settings.calibration, facts=run_settings.facts
                )
                if observe:
                    observe(record)
                if not alone and event.action.value in TURNED_BACK:  # the ranking learns from the human only
                    ranker.update(scored, event.response, (event.reviewer,))
                touched.add((request.state.value, request.task_type))
                if n % SESSION_GATES == 0:  # the replay's stand-in for a session's consolidation
                    learn_facts(memory, touched, n, run_settings.facts)
                    touched.clear()
                    if run_settings.memory.storage:
                        memory.settle_buffer()
                if progress:
                    progress(1)
            # Regret is found by a later human answer, never by the replay peeking: the
            # store's own record of it, marked on the gate it was about.
            by_chunk = {chunk_id_for(principal, f"replay/{e.gate_id}"): i for i, e in enumerate(events)}
            for chunk_id, _, _ in regrets(memory.store):
                preds[by_chunk[chunk_id]].regretted = True
            if inspect:
                inspect(memory)
        finally:
            memory.close()
    return preds


def contribution(events: list[GateEvent], preds: list[Prediction]) -> KindCounts:
    """What a replayed reviewer's team gets of them: their human answers per kind of
    action (the gates they answered, not those the proxy answered alone)."""
    counts = KindCounts()
    for event, pred in zip(events, preds):
        if not pred.autonomous:
            counts.add(
                kinds_of(event.request(principal_for(event.reviewer))), outcome_of(event.action.value, event.ask_first)
            )
    return counts


def _team_fields(e: GateEvent) -> dict:
    return dict(kind=rule_kind(e.request(principal_for(e.reviewer))), split=e.split, ask_first=e.ask_first)


def _majority(events: list[GateEvent], progress: Progress | None) -> list[Prediction]:
    """Predict the reviewer's most frequent action so far, with its share as confidence."""
    seen: Counter[str] = Counter()
    preds = []
    for e in events:
        if seen:
            action, count = seen.most_common(1)[0]
            conf = count / sum(seen.values())
        else:
            action, conf = None, 0.0
        preds.append(
            Prediction(
                seq=e.seq,
                task_type=e.task_type,
                **_team_fields(e),
                actual=e.action.value,
                predicted=action,
                confidence=conf,
                autonomous=action is not None and conf >= BASELINE_THRESHOLD,
                predicted_text="",
                actual_text=e.response,
            )
        )
        seen[e.action.value] += 1
        if progress:
            progress(1)
    return preds


EMA_ALPHA = 0.3
REGRET_WEIGHT = 3.0


def _ema_gate(events: list[GateEvent], progress: Progress | None) -> list[Prediction]:
    """The reference implementation's old gate: per (state, task type) an EMA of
    approvals (alpha 0.3, corrections weigh 3x); approve alone when it is >= 0.8."""
    ema: dict[tuple[str, str], float] = {}
    preds = []
    for e in events:
        key = (e.state.value, e.task_type)
        value = ema.get(key)
        if value is None:
            predicted, conf = None, 0.0
        else:
            predicted = "approve" if value >= 0.5 else "correct"
            conf = value if predicted == "approve" else 1 - value
        preds.append(
            Prediction(
                seq=e.seq,
                task_type=e.task_type,
                **_team_fields(e),
                actual=e.action.value,
                predicted=predicted,
                confidence=conf,
                autonomous=predicted == "approve" and conf >= BASELINE_THRESHOLD,
                predicted_text="Approved." if predicted == "approve" else "",
                actual_text=e.response,
            )
        )
        x = 1.0 if e.action.value == "approve" else 0.0
        w = REGRET_WEIGHT if e.action.value == "correct" else 1.0
        prev = 0.5 if value is None else value
        ema[key] = prev + min(EMA_ALPHA * w, 1.0) * (x - prev)
        if progress:
            progress(1)
    return preds
