"""Baselines for a team's replay, each built online from the earlier members' answers (per
kind of action, as the team prior gets them) and the reviewer's own earlier answers:

- `team-majority`: the team's most frequent answer on the same kind of action (the study's
  app and data type);
- `prior-bias`: a population prior with a per-person bias: the team's rate of each action
  on the kind (shrunk toward its overall rate), plus the reviewer's mean residual against
  that prior on their earlier gates; the highest wins.
"""

from __future__ import annotations

from collections.abc import Callable

from vicar.eval.dataset import GateEvent, principal_for
from vicar.eval.metrics import BASELINE_THRESHOLD, Prediction
from vicar.models import GateRequest
from vicar.proxy.team import KindCounts, action_of, kinds_of

Progress = Callable[[int], None]
PRIOR_WEIGHT = 2.0  # pseudo-answers of the team's overall rates behind a kind's


def rule_kind(request: GateRequest) -> str:
    """The scope of a rule suggestion: the gate's kind of action (its lineage where it has
    one, else its task type)."""
    kinds = kinds_of(request)
    return kinds.get("lineage") or kinds["task"]


def _actions(counts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for o, n in counts.items():
        out[action_of(o)] = out.get(action_of(o), 0) + n
    return out


def _prediction(e: GateEvent, request: GateRequest, predicted: str | None, confidence: float) -> Prediction:
    confidence = min(max(confidence, 0.0), 1.0)
    return Prediction(
        seq=e.seq,
        task_type=e.task_type,
        kind=rule_kind(request),
        split=e.split,
        ask_first=e.ask_first,
        actual=e.action.value,
        predicted=predicted,
        confidence=confidence,
        autonomous=predicted is not None and confidence >= BASELINE_THRESHOLD,
        alone_action=predicted,
        alone_score=confidence if predicted is not None else None,
        actual_text=e.response,
    )


def team_majority(events: list[GateEvent], team: KindCounts | None, progress: Progress | None) -> list[Prediction]:
    preds = []
    for e in events:
        request = e.request(principal_for(e.reviewer))
        counts = _actions(team.of("lineage", kinds_of(request))) if team else {}
        if counts:
            action = max(sorted(counts), key=lambda a: counts[a])
            preds.append(_prediction(e, request, action, counts[action] / sum(counts.values())))
        else:
            preds.append(_prediction(e, request, None, 0.0))
        if progress:
            progress(1)
    return preds


def prior_bias(events: list[GateEvent], team: KindCounts | None, progress: Progress | None) -> list[Prediction]:
    preds = []
    residual: dict[str, float] = {}  # the reviewer's answers minus the prior, summed per action
    seen = 0
    for e in events:
        request = e.request(principal_for(e.reviewer))
        kinds = kinds_of(request)
        overall = _actions(team.of("all", kinds)) if team else {}
        actions = sorted(set(overall) | set(residual))
        prior: dict[str, float] = {}
        if actions:
            n_all = sum(overall.values())
            base = {a: (overall.get(a, 0) + 1.0) / (n_all + len(actions)) for a in actions}
            kind = _actions(team.of("lineage", kinds)) if team else {}
            n = sum(kind.values())
            prior = {a: (kind.get(a, 0) + PRIOR_WEIGHT * base[a]) / (n + PRIOR_WEIGHT) for a in actions}
            score = {a: p + (residual.get(a, 0.0) / seen if seen else 0.0) for a, p in prior.items()}
            action = max(actions, key=lambda a: score[a])
            preds.append(_prediction(e, request, action, score[action]))
        else:
            preds.append(_prediction(e, request, None, 0.0))
        for a in set(actions) | {e.action.value}:
            residual[a] = residual.get(a, 0.0) + float(a == e.action.value) - prior.get(a, 0.0)
        seen += 1
        if progress:
            progress(1)
    return preds


TEAM_BASELINES: dict[str, Callable[[list[GateEvent], KindCounts | None, Progress | None], list[Prediction]]] = {
    "team-majority": team_majority,
    "prior-bias": prior_bias,
}
