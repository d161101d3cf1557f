"""Which predictor the worker uses."""

from __future__ import annotations

import os

from vicar.errors import VicarError
from vicar.memory.registry import MemoryRegistry
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.provider import Predictor
from vicar.settings import Settings

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def predictor_name(settings: Settings) -> str:
    """VICAR_PREDICTOR if set; otherwise the first provider whose key the worker has
    (anthropic, then openai), else the learned model (the memory vote until its first
    fit), which needs no key. `offline` is the memory vote alone."""
    if settings.predictor_name:
        return settings.predictor_name
    for provider in ("anthropic", "openai"):
        if os.environ.get(KEY_ENV[provider], "").strip():
            return provider
    return "learned"


def predictor_from_env(settings: Settings, registry: MemoryRegistry) -> Predictor:
    name = predictor_name(settings)
    if name == "offline":
        return OfflinePredictor(settings.predictor)
    if name == "learned":
        from vicar.proxy.learned_store import LearnedModels
        from vicar.proxy.team_store import counts_for

        def team(principal: str):
            return counts_for(settings.data_dir, principal)

        # The passes run through using(), hence the ignore.
        return LearnedModels(registry, settings.predictor, team=team)  # type: ignore[abstract]
    if not os.environ.get(KEY_ENV[name], "").strip():
        raise VicarError(f"VICAR_PREDICTOR={name} needs {KEY_ENV[name]} in the worker's environment")
    # Imported here: the SDKs load only when an LLM predictor is chosen.
    from vicar.proxy.llm_predictor import LLMPredictor

    return LLMPredictor.from_env(name)
