"""Which provider and models the LLM predictor uses, from the worker's environment."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from vicar.errors import VicarError
from vicar.llm.base import LLMClient
from vicar.llm.pricing import price_for

Provider = Literal["anthropic", "openai"]
PROVIDERS: tuple[str, ...] = ("anthropic", "openai")
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
# (main passes, classification / agent reply / surprise)
DEFAULT_MODELS = {
    "anthropic": ("claude-sonnet-4-6", "claude-haiku-4-5"),
    "openai": ("gpt-4.1", "gpt-4.1-mini"),
}


class LLMSettings(BaseModel):
    provider: Provider
    model: str
    classifier_model: str
    timeout_s: float = 120.0

    @classmethod
    def from_env(cls, provider: str) -> "LLMSettings":
        """VICAR_LLM_MODEL and VICAR_LLM_CLASSIFIER_MODEL override the provider's
        defaults; VICAR_LLM_TIMEOUT (seconds) bounds one request. Both models must be
        priced (pricing.py): an unknown one is refused here, not billed as zero."""
        if provider not in PROVIDERS:
            raise VicarError(f"unknown LLM provider {provider!r}; available: {', '.join(PROVIDERS)}")
        from vicar.config import llm_from_env

        main, classifier = DEFAULT_MODELS[provider]
        env = llm_from_env()
        model = env.model or main
        classifier_model = env.classifier_model or classifier
        timeout_s = env.timeout_s
        price_for(model)
        price_for(classifier_model)
        return cls(provider=provider, model=model, classifier_model=classifier_model, timeout_s=timeout_s)


def make_client(settings: LLMSettings) -> LLMClient:
    """The SDK client for the provider; VicarError when its key is missing, NotInstalled
    when its SDK is."""
    from vicar.memory.optional import require

    require(settings.provider, "llm", f"the {settings.provider} predictor")
    if settings.provider == "anthropic":
        from vicar.llm.anthropic_client import AnthropicClient

        return AnthropicClient(timeout_s=settings.timeout_s)
    from vicar.llm.openai_client import OpenAIClient

    return OpenAIClient(timeout_s=settings.timeout_s)
