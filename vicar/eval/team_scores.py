"""Teams and the wish to be asked: the figures of a replay whose events carry a team, a
split or "… but ask me first" answers (the permission study), and the rule suggestions
and support of any replay.

- accuracy on the `test` decisions without `ask_first` (the study's figure): of the
  proposal (the likeliest answer) and of the answer the proxy would give alone (the
  likeliest answer given without a wish to be asked);
- accuracy on each person's gates 2–5 (their first answers count most in their first days);
- how well the predicted wish to be asked ranks the `ask_first` answers (AUROC);
- autonomy as the replay realized it, and its error with a lone answer where the person
  wanted to be asked counted as an error, whatever its action;
- the lone-answer score's hindsight ceiling on the test decisions (the largest share one
  threshold answers alone at error <= the target, `ask_first` counted as errors), and an
  online team-pooled rule: before each person, the lowest threshold at which the earlier
  members' gates prove the target (one-sided 95% Clopper-Pearson), used on the person;
  and the same with the earlier members' plug-in threshold (their hindsight one, no bound);
- accepted rule suggestions: once the person has given the same answer SUGGEST_RUN times in
  a row on one kind of action, never a contrary one there nor asked to be asked, a rule is
  suggested; if accepted it answers that kind from then on: its share and error;
- support: the share of gates whose lone answer the person's own answers of its kind
  supported, and the lone answers given without it (None where the replay does not judge it).

Pure functions over the predictions, each person's in order, the people in file order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from vicar.eval.metrics import MAX_AUTONOMOUS_ERROR, Prediction, best_share
from vicar.eval.separation import auroc

EARLY = range(1, 5)  # gates 2-5 of each person (0-based positions)
SUGGEST_RUN = 5
ONLINE_DELTA = 0.05  # the online rule's bound holds with probability 1 - delta
PERSON_LIMIT = 0.10  # the goal: no person with >= PERSON_LEAST lone answers above this error
PERSON_LEAST = 20


class TeamScores(BaseModel):
    study: bool  # the events carry a split or ask-first answers (the permission study's fields)
    people: int
    gates: int
    test: int  # test decisions without ask_first
    test_accuracy: float | None
    test_alone_accuracy: float | None
    early: int
    early_accuracy: float | None
    ask_share: float  # of every answer
    ask_auroc: float | None  # the predicted wish to be asked against the ask_first answers
    alone: int
    alone_share: float
    alone_error: float | None  # ask_first lone answers counted as errors
    test_gates: int  # every test decision
    hindsight_share: float  # of the test decisions
    hindsight_threshold: float | None
    online_share: float  # of the test decisions
    online_error: float | None
    online_all_share: float  # of every gate
    online_all_error: float | None
    online_people_over: int  # people with >= PERSON_LEAST lone answers above PERSON_LIMIT
    # The same with the plug-in threshold (the earlier people's hindsight one, no bound).
    plugin_share: float = 0.0  # of the test decisions
    plugin_error: float | None = None
    plugin_people_over: int = 0
    suggestions: int  # rules suggested (and taken as accepted)
    suggestion_share: float  # of every gate, answered by an accepted suggestion
    suggestion_error: float | None
    supported_share: float | None  # of the gates where support was judged
    unsupported_alone: int


def _alone(p: Prediction) -> str | None:
    """The answer given alone: a baseline's is its prediction."""
    return p.alone_action if p.alone_action is not None else p.predicted


def _lone_right(p: Prediction) -> bool:
    return _alone(p) == p.actual and not p.ask_first


def _people_over(groups: Sequence[Sequence[Prediction]], alone: Sequence[Sequence[bool]]) -> int:
    over = 0
    for g, o in zip(groups, alone):
        lone = [_lone_right(p) for p, a in zip(g, o) if a]
        over += len(lone) >= PERSON_LEAST and 1 - float(np.mean(lone)) > PERSON_LIMIT
    return over


def _share(xs: Sequence[bool]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def hindsight(preds: Sequence[Prediction], target: float = MAX_AUTONOMOUS_ERROR) -> tuple[float, float | None]:
    """(share, threshold): the largest share of `preds` one threshold on the lone-answer
    score answers alone within `target`, ask_first counted as errors."""
    scores = np.array([np.nan if p.alone_score is None else p.alone_score for p in preds], dtype=float)
    right = np.array([_lone_right(p) for p in preds], dtype=bool)
    share = best_share(scores, right, len(preds), target)
    if not share:
        return 0.0, None
    taken = round(share * len(preds))
    return share, float(np.sort(scores[~np.isnan(scores)])[::-1][taken - 1])


def proven_threshold(
    scores: np.ndarray, right: np.ndarray, target: float = MAX_AUTONOMOUS_ERROR, delta: float = ONLINE_DELTA
) -> float | None:
    """The lowest threshold whose pairs at or above it bound the error within `target` at
    1 - delta (Clopper-Pearson); None when none does."""
    from scipy.stats import beta

    if not len(scores):
        return None
    order = np.argsort(-scores, kind="stable")
    s, ok = scores[order], right[order]
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    taken = ends + 1
    errors = taken - np.cumsum(ok)[ends]
    upper = np.where(errors >= taken, 1.0, beta.ppf(1 - delta, errors + 1, np.maximum(taken - errors, 1)))
    good = np.flatnonzero(upper <= target)
    return float(s[ends[good[-1]]]) if len(good) else None


def plugin_threshold(scores: np.ndarray, right: np.ndarray, target: float = MAX_AUTONOMOUS_ERROR) -> float | None:
    """The lowest threshold whose pairs at or above it erred at most `target` (no bound:
    the hindsight threshold of the pairs given)."""
    if not len(scores):
        return None
    order = np.argsort(-scores, kind="stable")
    s, ok = scores[order], right[order]
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    error = 1 - np.cumsum(ok)[ends] / (ends + 1)
    good = np.flatnonzero(error <= target + 1e-12)
    return float(s[ends[good[-1]]]) if len(good) else None


def online_rule(
    groups: Sequence[Sequence[Prediction]], target: float = MAX_AUTONOMOUS_ERROR, threshold=proven_threshold
) -> list[list[bool]]:
    """Per person, which gates a team-pooled rule answers alone: `threshold` (proven, or
    plug-in) on the earlier people's gates (their lone-answer scores and whether a lone
    answer would have been right)."""
    scores: list[float] = []
    right: list[bool] = []
    out = []
    for g in groups:
        t = threshold(np.array(scores, dtype=float), np.array(right, dtype=bool), target)
        out.append([t is not None and p.alone_score is not None and p.alone_score >= t for p in g])
        for p in g:
            if p.alone_score is not None:
                scores.append(p.alone_score)
                right.append(_lone_right(p))
    return out


def suggestions(preds: Sequence[Prediction], run: int = SUGGEST_RUN) -> tuple[int, list[bool | None]]:
    """(rules suggested, per gate: None where no accepted rule answered it, else whether
    the rule's answer was the person's and they did not want to be asked)."""
    streak: dict[str, tuple[str, int]] = {}
    spoiled: set[str] = set()
    rules: dict[str, str] = {}
    out: list[bool | None] = []
    for p in preds:
        if p.kind in rules:
            out.append(rules[p.kind] == p.actual and not p.ask_first)
            continue
        out.append(None)
        if p.autonomous:
            continue  # the person did not answer it
        last = streak.get(p.kind)
        if p.ask_first or (last is not None and last[0] != p.actual):
            spoiled.add(p.kind)
        streak[p.kind] = (p.actual, last[1] + 1 if last and last[0] == p.actual else 1)
        if p.kind not in spoiled and streak[p.kind][1] >= run:
            rules[p.kind] = p.actual
    return len(rules), out


def team_scores(per_reviewer: Mapping[str, Sequence[Prediction]], target: float = MAX_AUTONOMOUS_ERROR) -> TeamScores:
    groups = list(per_reviewer.values())
    every = [p for g in groups for p in g]
    test = [p for p in every if p.split == "test" and not p.ask_first]
    test_all = [p for p in every if p.split == "test"]
    early = [g[i] for g in groups for i in EARLY if i < len(g)]
    alone = [p for p in every if p.autonomous]
    asked = [(p.wants_asked, p.ask_first) for p in every if p.wants_asked is not None]
    share, threshold = hindsight(test_all, target)
    online = online_rule(groups, target)
    online_test = [p for g, o in zip(groups, online) for p, a in zip(g, o) if a and p.split == "test"]
    online_all = [p for g, o in zip(groups, online) for p, a in zip(g, o) if a]
    plugin = online_rule(groups, target, plugin_threshold)
    plugin_test = [p for g, o in zip(groups, plugin) for p, a in zip(g, o) if a and p.split == "test"]
    rules = 0
    ruled: list[bool] = []
    for g in groups:
        n, answered = suggestions(g)
        rules += n
        ruled += [x for x in answered if x is not None]
    judged = [p for p in every if p.supported is not None]
    return TeamScores(
        study=has_team_fields(every),
        people=len(groups),
        gates=len(every),
        test=len(test),
        test_accuracy=_share([p.correct for p in test]),
        test_alone_accuracy=_share([_alone(p) == p.actual for p in test]),
        early=len(early),
        early_accuracy=_share([p.correct for p in early]),
        ask_share=float(np.mean([p.ask_first for p in every])) if every else 0.0,
        ask_auroc=auroc([s for s, _ in asked], [a for _, a in asked]) if asked else None,
        alone=len(alone),
        alone_share=len(alone) / len(every) if every else 0.0,
        alone_error=1 - float(np.mean([p.correct and not p.ask_first for p in alone])) if alone else None,
        test_gates=len(test_all),
        hindsight_share=share,
        hindsight_threshold=threshold,
        online_share=len(online_test) / len(test_all) if test_all else 0.0,
        online_error=1 - float(np.mean([_lone_right(p) for p in online_test])) if online_test else None,
        online_all_share=len(online_all) / len(every) if every else 0.0,
        online_all_error=1 - float(np.mean([_lone_right(p) for p in online_all])) if online_all else None,
        online_people_over=_people_over(groups, online),
        plugin_share=len(plugin_test) / len(test_all) if test_all else 0.0,
        plugin_error=1 - float(np.mean([_lone_right(p) for p in plugin_test])) if plugin_test else None,
        plugin_people_over=_people_over(groups, plugin),
        suggestions=rules,
        suggestion_share=len(ruled) / len(every) if every else 0.0,
        suggestion_error=1 - float(np.mean(ruled)) if ruled else None,
        supported_share=float(np.mean([bool(p.supported) for p in judged])) if judged else None,
        unsupported_alone=sum(p.autonomous and p.supported is False for p in every),
    )


def has_team_fields(preds: Sequence[Prediction]) -> bool:
    """Whether a replay's events carry the permission study's fields."""
    return any(p.split is not None or p.ask_first for p in preds)
