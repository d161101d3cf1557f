"""Which predictor the worker picks from its environment (VICAR_PREDICTOR, the
providers' keys, the model names)."""

from __future__ import annotations

import pytest

from vicar.errors import VicarError
from vicar.memory.registry import MemoryRegistry
from vicar.proxy.llm_predictor import LLMPredictor
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.select import predictor_from_env
from vicar.settings import Settings

from .test_llm import ANTHROPIC_KEY, HAIKU, OPENAI_KEY, SONNET, clean_env  # noqa: F401 (clean_env: autouse fixture)


def _select(settings: Settings):
    # No memory is opened by selection: the registry is only kept by the learned model.
    return predictor_from_env(settings, MemoryRegistry(settings.principals_dir, lambda: None, settings.memory))


def test_select_defaults_to_the_learned_model_without_keys():
    from vicar.proxy.learned_store import LearnedModels

    p = _select(Settings())
    assert isinstance(p, LearnedModels) and p.name == "learned" and p.local


def test_select_prefers_anthropic_then_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    p = _select(Settings())
    assert isinstance(p, LLMPredictor) and p.name == "openai"
    assert (p.model, p.classifier_model) == ("gpt-4.1", "gpt-4.1-mini")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    p = _select(Settings())
    assert p.name == "anthropic" and (p.model, p.classifier_model) == (SONNET, HAIKU)


def test_select_explicit_choice_and_models(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("VICAR_PREDICTOR", "offline")
    assert isinstance(_select(Settings()), OfflinePredictor)
    monkeypatch.setenv("VICAR_PREDICTOR", " Anthropic ")
    monkeypatch.setenv("VICAR_LLM_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("VICAR_LLM_CLASSIFIER_MODEL", "claude-haiku-4-5-20251001")
    p = _select(Settings())
    assert (p.name, p.model, p.classifier_model) == ("anthropic", HAIKU, "claude-haiku-4-5-20251001")


def test_select_errors(monkeypatch):
    monkeypatch.setenv("VICAR_PREDICTOR", "gemini")
    with pytest.raises(
        VicarError, match="VICAR_PREDICTOR must be learned, offline, anthropic or openai \\(any case\\), not 'gemini'"
    ):
        _select(Settings())
    monkeypatch.setenv("VICAR_PREDICTOR", "openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)  # the other provider's key does not count
    with pytest.raises(VicarError, match="VICAR_PREDICTOR=openai needs OPENAI_API_KEY"):
        _select(Settings())
    monkeypatch.setenv("VICAR_PREDICTOR", "anthropic")
    monkeypatch.setenv("VICAR_LLM_MODEL", "claude-unknown")
    with pytest.raises(VicarError, match="no price known for LLM model 'claude-unknown'"):
        _select(Settings())
