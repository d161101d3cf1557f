"""Which provider and models the LLM predictor uses: the provider's own defaults unless
the settings name others (VICAR_LLM_MODEL, VICAR_LLM_CLASSIFIER_MODEL: Settings.llm),
both priced, and the SDK client for it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from vicar.errors import VicarError
from vicar.llm.base import LLMClient
from vicar.llm.pricing import price_for
from vicar.settings import LLMParams, Settings

Provider = Literal["anthropic", "openai"]
PROVIDERS: tuple[str, ...] = ("anthropic", "openai")
# (main passes, classification / agent reply / surprise)
DEFAULT_MODELS = {
    "anthropic": ("claude-sonnet-4-6", "claude-haiku-4-5"),
    "openai": ("gpt-4.1", "gpt-4.1-mini"),
}


class LLMChoice(BaseModel):
    provider: Provider
    model: str
    classifier_model: str
    timeout_s: float = 120.0

    @classmethod
    def of(cls, provider: str, params: LLMParams) -> LLMChoice:
        """The provider's models as the settings name them. Both must be priced
        (pricing.py): an unknown one is refused here, not billed as zero."""
        if provider not in PROVIDERS:
            raise VicarError(f"unknown LLM provider {provider!r}; available: {', '.join(PROVIDERS)}")
        main, classifier = DEFAULT_MODELS[provider]
        model = params.model or main
        classifier_model = params.classifier_model or classifier
        price_for(model)
        price_for(classifier_model)
        return cls(provider=provider, model=model, classifier_model=classifier_model, timeout_s=params.timeout_s)

    @classmethod
    def from_env(cls, provider: str) -> LLMChoice:
        """As this process's settings name them."""
        return cls.of(provider, Settings.from_env().llm)


def make_client(choice: LLMChoice) -> LLMClient:
    """The SDK client for the provider; VicarError when its key is missing, NotInstalled
    when its SDK is."""
    from vicar.memory.optional import require

    require(choice.provider, "llm", f"the {choice.provider} predictor")
    if choice.provider == "anthropic":
        from vicar.llm.anthropic_client import AnthropicClient

        return AnthropicClient(timeout_s=choice.timeout_s)
    from vicar.llm.openai_client import OpenAIClient

    return OpenAIClient(timeout_s=choice.timeout_s)
