"""`vicar eval replay`: load, embed once, replay every variant, score, report."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, Field
from rich.console import Console

from vicar.eval import metrics as m
from vicar.eval.dataset import GateEvent
from vicar.eval.replay import Variant, contribution, event_texts, replay_reviewer
from vicar.eval.separation import Separation, prefill, separation
from vicar.eval.team_scores import TeamScores, team_scores
from vicar.eval.words import (
    FOR_ACTION,
    PREREVIEW,
    PREREVIEW_LEARNED,
    SCORED,
    Words,
    WordScores,
    baselines,
    for_action,
    score_words,
    words_texts,
)
from vicar.memory.embedder import Embedder
from vicar.progress import progress as progress_for
from vicar.proxy.team import KindCounts
from vicar.settings import MemoryParams, Settings


class Scores(BaseModel):
    gates: int
    accuracy: float
    macro_f1: float
    per_class_f1: dict[str, float | None]
    brier: float
    ece: float
    reliability: list[m.Bin]
    autonomy: m.Autonomy
    autonomy_curve: list[tuple[float, float, float]]
    surprise: m.SurpriseCalibration
    curve: list[dict]
    # What the score knows, beside the pre-fill baseline (vicar/eval/separation.py).
    separation: Separation | None = None
    # The words headline (vicar/eval/words.py): the proxy's words on correct/reject events.
    words: WordScores | None = None
    cost_usd: float = 0.0  # LLM calls of the predictor, as billed by the pricing table


class GateRow(BaseModel):
    """One replayed gate, for simulating autonomy rules over a recorded stream
    (bench/autonomy_bound_bench.py): the predictions' scores hardly depend on the rule."""

    reviewer: str
    order: int  # the gate's place in the reviewer's history, from 0
    state: str
    task_type: str
    score: float | None  # the predictor's own confidence (the rule's score); None: no prediction
    correct: bool
    autonomous: bool
    bound: float | None = None  # the error bound the rule stated at this gate (None: no threshold in force)
    predicted: str | None = None  # the proposed action
    alone_score: float | None = None  # P(the lone answer is the person's and they did not ask to be asked)
    ask_first: bool = False  # the person wanted to be asked


class VariantResult(BaseModel):
    variant: Variant
    per_reviewer: dict[str, Scores]
    overall: Scores
    seconds: float
    # The words metric for this variant ("proxy") and, in the same run, its baselines.
    words: dict[str, Words] = Field(default_factory=dict)
    # The pre-review's items per correct/reject event, per reviewer and pooled ("all").
    prereview_items: dict[str, float] = Field(default_factory=dict)
    # Teams, the wish to be asked, rule suggestions and support (vicar/eval/team_scores.py).
    team: TeamScores | None = None
    gates: list[GateRow] = Field(default_factory=list, exclude=True)  # not in results.json

    @property
    def gates_per_second(self) -> float:
        return self.overall.gates / self.seconds if self.seconds else 0.0


def score(
    preds: list[m.Prediction],
    groups: list[list[m.Prediction]] | None = None,
    target: float = m.MAX_AUTONOMOUS_ERROR,
) -> Scores:
    """`groups`: the predictions split by reviewer, for the figures that follow a history
    (and the pre-fill baseline, which follows each reviewer's own answers)."""
    in_order = [p for g in groups for p in g] if groups is not None else preds
    prefilled = [x for g in (groups if groups is not None else [preds]) for x in prefill([p.actual for p in g])]
    return Scores(
        gates=len(preds),
        accuracy=m.accuracy(preds),
        macro_f1=m.macro_f1(preds),
        per_class_f1=m.per_class_f1(preds),
        brier=m.brier(preds),
        ece=m.ece(preds),
        reliability=m.reliability(preds),
        autonomy=m.autonomy(preds, groups, target),
        autonomy_curve=m.autonomy_curve(preds),
        surprise=m.surprise_calibration(preds),
        curve=m.learning_curve(preds) if groups is None else m.pooled_curve(groups),
        separation=separation(
            [m.score_of(p) for p in in_order],
            [p.correct for p in in_order],
            [p.autonomous for p in in_order],
            [p.suggested or p.predicted for p in in_order],
            [p.actual for p in in_order],
            [p.task_type for p in in_order],
            prefilled,
        ),
        cost_usd=sum(p.cost_usd for p in preds),
    )


# Texts per embedding call while warming: small enough that progress moves every second
# or so (packed batches cost the sum of their texts, so nothing is lost by smaller calls).
WARM_BATCH = 64


def warm_embeddings(
    events: dict[str, list[GateEvent]], embedder: Embedder, console: Console, batch: int = WARM_BATCH
) -> float:
    """Embed every text of the dataset once, batched; the cache serves the replay."""
    # With what the words metrics will need of the dataset alone (the human replies'
    # sentences), so a cold run embeds them in this batched pass, not at the end.
    texts = list(dict.fromkeys(event_texts([e for evs in events.values() for e in evs]) + words_texts(events)))
    start = time.perf_counter()
    with progress_for(console) as progress:
        task = progress.add_task("embedding the dataset", total=len(texts))
        for i in range(0, len(texts), batch):
            embedder.embed(texts[i : i + batch])
            progress.advance(task, min(batch, len(texts) - i))
    return time.perf_counter() - start


def embed_words(
    events: dict[str, list[GateEvent]],
    texts: Mapping[str, Mapping[str, Sequence[str]]],
    embedder: Embedder,
    progress,
    name: str,
    batch: int = WARM_BATCH,
) -> dict[str, np.ndarray]:
    """Every text the words metrics score, embedded in batches with progress shown: the
    predicted words are new on a first run, minutes of embedding."""
    needed = words_texts(events, texts)
    task = progress.add_task(f"{name}: the words metrics", total=len(needed))
    vectors: dict[str, np.ndarray] = {}
    for i in range(0, len(needed), batch):
        part = needed[i : i + batch]
        vectors.update(zip(part, embedder.embed(part)))
        progress.advance(task, len(part))
    return vectors


def run_variants(
    events: dict[str, list[GateEvent]],
    variants: list[Variant],
    embedder: Embedder,
    settings: Settings,
    console: Console,
) -> list[VariantResult]:
    total = sum(len(v) for v in events.values())
    floors: dict[str, dict[str, Sequence[str]]] = {}  # the variant-free baselines, built once
    floor_words: dict[str, Words] = {}  # their scores do not depend on the variant: scored once
    results = []
    with progress_for(console) as progress:
        task = progress.add_task("the words' baselines", total=total)
        for r, evs in events.items():
            for label, floor_texts in baselines(evs, embedder).items():
                floors.setdefault(label, {})[r] = floor_texts
            progress.advance(task, len(evs))
        for variant in variants:
            task = progress.add_task(variant.name, total=total)
            start = time.perf_counter()
            per_reviewer_preds = replay_teams(
                events, variant, embedder, settings, functools.partial(progress.advance, task)
            )
            seconds = time.perf_counter() - start
            target = settings.calibration.autonomy.target_error
            per_reviewer = {r: score(p, target=target) for r, p in per_reviewer_preds.items()}
            all_preds = [p for ps in per_reviewer_preds.values() for p in ps]
            overall = score(all_preds, groups=list(per_reviewer_preds.values()), target=target)
            rows = [
                GateRow(
                    reviewer=r,
                    order=i,
                    state=e.state.value,
                    task_type=e.task_type,
                    score=p.posterior_confidence if p.predicted is not None else None,
                    correct=p.correct,
                    autonomous=p.autonomous,
                    bound=p.bound,
                    predicted=p.predicted,
                    alone_score=p.alone_score,
                    ask_first=p.ask_first,
                )
                for r, ps in per_reviewer_preds.items()
                for i, (e, p) in enumerate(zip(events[r], ps))
            ]
            texts: dict[str, dict[str, Sequence[str]]] = {
                "proxy": {r: [p.predicted_text for p in ps] for r, ps in per_reviewer_preds.items()},
                PREREVIEW: {r: [p.prereview_text for p in ps] for r, ps in per_reviewer_preds.items()},
                PREREVIEW_LEARNED: {r: [p.prereview_learned_text for p in ps] for r, ps in per_reviewer_preds.items()},
                FOR_ACTION: {
                    r: for_action(events[r], [p.predicted for p in ps]) for r, ps in per_reviewer_preds.items()
                },
                **({} if floor_words else floors),
            }
            words = score_words(
                events, texts, embedder, vectors=embed_words(events, texts, embedder, progress, variant.name)
            )
            floor_words = floor_words or {k: v for k, v in words.items() if k in floors}
            words.update(floor_words)
            for r, sc in per_reviewer.items():
                sc.words = words["proxy"].per_reviewer.get(r)
            overall.words = words["proxy"].pooled
            counts = {
                r: [len([x for x in p.prereview_text.split("\n\n") if x.strip()]) for p in ps if p.actual in SCORED]
                for r, ps in per_reviewer_preds.items()
            }
            counts["all"] = [c for cs in counts.values() for c in cs]
            results.append(
                VariantResult(
                    variant=variant,
                    per_reviewer=per_reviewer,
                    overall=overall,
                    seconds=seconds,
                    words=words,
                    prereview_items={r: float(np.mean(cs)) for r, cs in counts.items() if cs},
                    gates=rows,
                    team=team_scores(per_reviewer_preds, target),
                )
            )
    return results


def replay_teams(
    events: dict[str, list[GateEvent]],
    variant: Variant,
    embedder: Embedder,
    settings: Settings,
    progress=None,
) -> dict[str, list[m.Prediction]]:
    """Every reviewer replayed in file order; the reviewers whose events share a `team`
    as one team: each after the earlier ones, with the team prior built only from the
    earlier members' answers per kind of action (what the replay of each gave the team:
    their human answers). A reviewer without a team is replayed alone."""
    teams: dict[str, KindCounts] = {}
    out: dict[str, list[m.Prediction]] = {}
    for r, evs in events.items():
        name = evs[0].team if evs else None
        counts = teams.setdefault(name, KindCounts()) if name else None
        preds = replay_reviewer(evs, variant, embedder, settings, progress, team=counts)
        if counts is not None:
            # A baseline has no proxy answering alone: every answer of the reviewer is known.
            counts.merge(
                contribution(
                    evs,
                    preds if variant.kind == "proxy" else [p.model_copy(update={"autonomous": False}) for p in preds],
                )
            )
        out[r] = preds
    return out


SWEEP: dict[str, list[float]] = {
    "decay": [0.3, 0.5, 0.7],
    "threshold": [-5.0, -3.0, -1.5],
    "noise_s": [0.0, 0.25],
    "w_activation": [0.25, 0.5, 0.75],
}


def sweep(
    events: dict[str, list[GateEvent]], embedder: Embedder, settings: Settings, console: Console
) -> tuple[MemoryParams, list[tuple[dict, float]]]:
    """Coordinate sweep of d, tau, s and the score weights on the dev data, by macro-F1
    (the labels are too unbalanced for accuracy). Each parameter is swept with the
    others at their best value so far."""
    best = MemoryParams()
    tried: list[tuple[dict, float]] = []
    cache: dict[str, float] = {}
    for name, values in SWEEP.items():
        scores = {}
        for value in values:
            update = {name: value}
            if name == "w_activation":
                update["w_similarity"] = 1.0 - value
            params = best.model_copy(update=update)
            key = params.model_dump_json()
            if key not in cache:
                [res] = run_variants(
                    events, [Variant(name=f"{name}={value}", memory=params)], embedder, settings, console
                )
                cache[key] = res.overall.macro_f1
                tried.append((update, cache[key]))
            scores[value] = cache[key]
        winner = max(scores, key=lambda v: (scores[v], v == getattr(best, name)))
        best = best.model_copy(
            update={name: winner, **({"w_similarity": 1.0 - winner} if name == "w_activation" else {})}
        )
    return best, tried
