"""Post-hoc calibration of the proxy's confidence: guards applied in the design's order."""

from __future__ import annotations

from vicar.models import Calibration

COLD_START_CAP = 0.5


def calibrate(confidence: float, memory_depth: int, depth_threshold: int) -> Calibration:
    """Cold-start (memory depth) first, then passthrough. The remaining guards of the
    design (tension, staleness, exploration, accuracy) slot in between, in order."""
    if memory_depth < depth_threshold and confidence > COLD_START_CAP:
        return Calibration(
            confidence=COLD_START_CAP, guard="cold_start",
            note=f"memory depth {memory_depth} < {depth_threshold}",
        )
    return Calibration(confidence=confidence, guard="passthrough")
