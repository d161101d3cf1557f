"""Which predictor the worker uses."""

from __future__ import annotations

import os

from vicar.config import Settings
from vicar.errors import VicarError
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.provider import Predictor


def predictor_from_env(settings: Settings) -> Predictor:
    name = os.environ.get("VICAR_PREDICTOR", "offline").strip().lower()
    if name == "offline":
        return OfflinePredictor(settings.predictor)
    raise VicarError(f"unknown VICAR_PREDICTOR {name!r}; available: offline")
