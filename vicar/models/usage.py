"""Tokens and cost of the LLM predictors' calls, summed per pass, per gate and per
session. Pydantic only: importable in the workflow sandbox."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    """Tokens and cost of LLM calls (summed with `+`)."""

    calls: int = 0
    input_tokens: int = 0  # uncached input
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cache_savings_usd: float = 0.0  # what the prompt cache saved against plain input

    def __add__(self, other: "Usage | None") -> "Usage":
        if other is None:
            return self
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})
