"""The best predictor at each moment (vicar.proxy.choose): candidates weighed by their
log-loss so far, a late candidate joining at the mixture's weight, and the weights a pure
function of the outcome log."""

from __future__ import annotations

import math

from vicar.proxy import choose as C


def test_the_candidate_that_predicts_better_takes_the_weight():
    chooser = C.Chooser()
    good = {"approve": 0.9, "reject": 0.1}
    poor = {"approve": 0.5, "reject": 0.5}
    for _ in range(20):
        chooser.observe({"model": good, "vote": poor}, "approve")
    w = chooser.weights(["model", "vote"])
    assert w["model"] > 0.99
    # ... and gives it back when it starts to err.
    for _ in range(40):
        chooser.observe({"model": good, "vote": poor}, "reject")
    assert chooser.weights(["model", "vote"])["vote"] > 0.99


def test_a_late_candidate_joins_at_the_mixtures_weight():
    """A sleeping candidate is charged the mixture's loss: the model fitted at the 30th
    answer starts level with the vote it joins, neither buried by the gates it could not
    predict nor handed them."""
    chooser = C.Chooser()
    for _ in range(30):
        chooser.observe({"vote": {"approve": 0.8, "reject": 0.2}}, "approve")
    assert chooser.weights(["vote", "model"]) == {"vote": 0.5, "model": 0.5}
    mixed, _ = chooser.mix({"vote": {"approve": 0.8, "reject": 0.2}, "model": {"approve": 0.4, "reject": 0.6}})
    assert math.isclose(mixed["approve"], 0.6) and math.isclose(mixed["reject"], 0.4)


def test_one_surprise_never_buries_a_candidate():
    chooser = C.Chooser()
    chooser.observe({"team": {"approve": 1.0}, "vote": {"approve": 0.6, "reject": 0.4}}, "reject")
    # Charged at FLOOR, not at probability 0: a few right answers bring it back.
    assert chooser.loss["team"] == -math.log(C.FLOOR)
    for _ in range(8):
        chooser.observe({"team": {"approve": 0.99, "reject": 0.01}, "vote": {"approve": 0.6, "reject": 0.4}}, "approve")
    assert chooser.weights(["team", "vote"])["team"] > 0.5


def test_the_weights_are_rebuilt_from_the_features_a_gate_kept():
    predictions = {"vote": {"approve": 0.7, "reject": 0.3}, "model": {"approve": 0.2, "reject": 0.8}}
    features = {"mem_conf": 0.4, **C.to_features(predictions)}
    assert C.from_features(features) == predictions
    live, rebuilt = C.Chooser(), C.Chooser()
    for actual in ("approve", "reject", "reject", "approve", "reject"):
        live.observe(predictions, actual)
        rebuilt.observe(C.from_features(features), actual)
    assert live.loss == rebuilt.loss and live.weights(["vote", "model"]) == rebuilt.weights(["vote", "model"])
