"""Post-hoc calibration of the proxy's confidence: the design's six guards, in order.

Each guard caps the confidence; the first one that fires is recorded as the reason,
and every one that would fire is listed, so an operator sees all of them. Pure: the
activity and the replay evaluation call the same function.
"""

from __future__ import annotations

import hashlib

from vicar.config import CalibrationParams
from vicar.models import Calibration, CalibrationInputs

GUARDS = ("cold_start", "tension", "staleness", "exploration", "accuracy")


def exploration_draw(principal: str, gate_key: str) -> float:
    """A uniform draw in [0, 1) fixed by the gate, so a retried or replayed gate explores
    (or not) the same way."""
    digest = hashlib.blake2b(f"explore\0{principal}\0{gate_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _reasons(inp: CalibrationInputs, p: CalibrationParams) -> list[tuple[str, str]]:
    fired: list[tuple[str, str]] = []
    if inp.memory_depth < p.memory_depth_threshold:
        fired.append(("cold_start", f"memory depth {inp.memory_depth} < {p.memory_depth_threshold}"))
    if inp.tension:
        fired.append(("tension", inp.tension))
    # Like the design's proxy_accuracy.last_updated: a context with no human answer yet
    # is not stale (cold start is the first guard's business).
    if inp.now is not None and inp.last_human_at is not None:
        age_days = (inp.now - inp.last_human_at).total_seconds() / 86400
        if age_days > p.staleness_days:
            fired.append(("staleness", f"last human answer {age_days:.1f} days ago > {p.staleness_days:g}"))
    if inp.exploration_draw < p.exploration_rate:
        fired.append(("exploration", f"explored (draw {inp.exploration_draw:.3f} < rate {p.exploration_rate:g})"))
    if inp.posterior_total >= p.accuracy_min_interactions:
        accuracy = inp.posterior_correct / inp.posterior_total
        if accuracy < p.accuracy_threshold:
            fired.append(("accuracy", f"posterior accuracy {accuracy:.2f} over {inp.posterior_total} "
                                      f"human answers < {p.accuracy_threshold:g}"))
    return fired


def calibrate(confidence: float, inp: CalibrationInputs, params: CalibrationParams) -> Calibration:
    fired = _reasons(inp, params)
    if not fired:
        return Calibration(confidence=confidence, guard="passthrough")
    guard, note = fired[0]
    return Calibration(
        confidence=min(confidence, params.cap), guard=guard, note=note, fired=[g for g, _ in fired],
    )
