"""The best predictor at each moment: the memory vote, the learned model and the team
prior weighed by their online log-loss on the person's own answers so far.

Each candidate gives a distribution over actions; the proxy's distribution is their mixture
with weights exp(-log-loss so far), the Bayesian mixture of the candidates. A candidate that
could not predict at a gate (the memory vote without evidence, the model before its first
fit, the team prior without a team) is a sleeping expert there: it is charged the mixture's
loss, so it joins later with the weight of the mixture, neither favoured nor buried by
the gates it slept through (Freund, Schapire, Singer and Warmuth, "Using and combining
predictors that specialize", 1997). So no fixed answer count switches from one predictor to
the next: the model takes over when, and as far as, its answers are better.

The losses are a pure function of the outcome log: each record keeps the distributions
its gate was predicted from (`PassResult.features`, `p_<candidate>:<action>`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

CANDIDATES = ("vote", "model", "team")
FLOOR = 0.01  # a loss is charged at this probability at worst: one surprise never buries a candidate
PREFIX = "p_"


def feature_key(candidate: str, action: str) -> str:
    return f"{PREFIX}{candidate}:{action}"


def to_features(predictions: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {feature_key(c, a): round(float(p), 6) for c, dist in predictions.items() for a, p in dist.items()}


def from_features(features: Mapping[str, float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, p in features.items():
        if key.startswith(PREFIX) and ":" in key:
            candidate, _, action = key[len(PREFIX) :].partition(":")
            if candidate in CANDIDATES:
                out.setdefault(candidate, {})[action] = float(p)
    return out


def _loss(dist: Mapping[str, float], actual: str) -> float:
    return -math.log(max(dist.get(actual, 0.0), FLOOR))


class Chooser:
    """One principal's candidates' log-loss on their human answers."""

    def __init__(self) -> None:
        self.loss: dict[str, float] = {}  # cumulative, per candidate ever awake
        self.mixture_loss = 0.0
        self.answers = 0

    def weights(self, awake: list[str]) -> dict[str, float]:
        """Each awake candidate's weight; a candidate never awake before enters at the
        mixture's loss."""
        losses = {c: self.loss.get(c, self.mixture_loss) for c in awake}
        if not losses:
            return {}
        best = min(losses.values())
        raw = {c: math.exp(-(v - best)) for c, v in losses.items()}
        total = sum(raw.values())
        return {c: w / total for c, w in raw.items()}

    def mix(self, predictions: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
        """(the mixture over actions, the weights)."""
        weights = self.weights(list(predictions))
        mixed: dict[str, float] = {}
        for c, dist in predictions.items():
            for a, p in dist.items():
                mixed[a] = mixed.get(a, 0.0) + weights[c] * p
        return mixed, weights

    def observe(self, predictions: Mapping[str, Mapping[str, float]], actual: str) -> None:
        """The person answered `actual` where the candidates had predicted `predictions`."""
        if not predictions:
            return
        mixed, _ = self.mix(predictions)
        step = _loss(mixed, actual)
        for c in set(self.loss) | set(predictions):
            before = self.loss.get(c, self.mixture_loss)
            self.loss[c] = before + (_loss(predictions[c], actual) if c in predictions else step)
        self.mixture_loss += step
        self.answers += 1

    def summary(self, weights: Mapping[str, float]) -> str:
        """ "learned model 0.93, team prior 0.05, memory vote 0.02" """
        names = {"vote": "memory vote", "model": "learned model", "team": "team prior"}
        first = {"model": 0, "team": 1, "vote": 2}  # on a tie (a candidate just joined): the newer first
        ranked = sorted(weights.items(), key=lambda kv: (-round(kv[1], 2), first.get(kv[0], 9)))
        return ", ".join(f"{names.get(c, c)} {w:.2f}" for c, w in ranked)
