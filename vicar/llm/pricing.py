"""What LLM calls cost: USD per million tokens, per model.

Prices are looked up when a predictor is configured, so an unknown model fails at
worker start with a clear message instead of being billed as zero.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from vicar.errors import VicarError


class ModelPrice(BaseModel):
    """USD per million tokens. `cache_write=None`: the provider charges no write
    premium (OpenAI), so tokens written to the cache are billed as plain input."""

    input: float
    cache_write: float | None
    cache_read: float
    output: float


PRICES: dict[str, ModelPrice] = {
    # Sonnet 4.5 reaches end of life on 2026-11-30 (the SDK warns); 4.6 is the default,
    # at the Sonnet tier's published rates.
    "claude-sonnet-4-6": ModelPrice(input=3.00, cache_write=3.75, cache_read=0.30, output=15.00),
    "claude-sonnet-4-5": ModelPrice(input=3.00, cache_write=3.75, cache_read=0.30, output=15.00),
    "claude-haiku-4-5": ModelPrice(input=1.00, cache_write=1.25, cache_read=0.10, output=5.00),
    "gpt-4.1": ModelPrice(input=2.00, cache_write=None, cache_read=0.50, output=8.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, cache_write=None, cache_read=0.10, output=1.60),
}

# Dated snapshots cost what their family costs: claude-sonnet-4-5-20250929,
# gpt-4.1-2025-04-14.
_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def price_for(model: str) -> ModelPrice:
    """The price of `model` (or of the family of a dated snapshot); VicarError if unknown."""
    name = model.strip().lower()
    price = PRICES.get(name) or PRICES.get(_SNAPSHOT.sub("", name))
    if price is None:
        raise VicarError(
            f"no price known for LLM model {model!r}; known: {', '.join(sorted(PRICES))} "
            "(add it to vicar/llm/pricing.py)"
        )
    return price


def cost_usd(
    model: str, *, input_tokens: int, cache_write_tokens: int, cache_read_tokens: int, output_tokens: int
) -> float:
    p = price_for(model)
    write_rate = p.input if p.cache_write is None else p.cache_write
    return (
        input_tokens * p.input
        + cache_write_tokens * write_rate
        + cache_read_tokens * p.cache_read
        + output_tokens * p.output
    ) / 1_000_000


def cache_savings_usd(model: str, *, cache_write_tokens: int, cache_read_tokens: int, **_) -> float:
    """What the prompt cache saved against sending the same tokens as plain input: reads
    at the discount, minus the write premium paid to fill the cache."""
    p = price_for(model)
    write_premium = 0.0 if p.cache_write is None else p.cache_write - p.input
    return (cache_read_tokens * (p.input - p.cache_read) - cache_write_tokens * write_premium) / 1_000_000
