"""Claude through the official `anthropic` SDK (Messages API), with prompt caching."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anthropic

from vicar.errors import VicarError
from vicar.llm.base import Completion, connection_failure, status_failure
from vicar.llm.pricing import cache_savings_usd, cost_usd
from vicar.models import Usage

if TYPE_CHECKING:
    from anthropic.types import TextBlockParam

DEFAULT_TIMEOUT_S = 120.0


class AnthropicClient:
    """The prefix becomes the `system` text blocks, the last one marked cacheable, so
    every call that shares the prefix (both passes of a gate, all gates of a session)
    reads it from Anthropic's prompt cache; the body is the single user message."""

    provider = "anthropic"

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
        if not key:
            raise VicarError("the anthropic predictor needs ANTHROPIC_API_KEY in the worker's environment")
        self._secrets = (key,)
        # Retries belong to Temporal's activity retry policy, not the SDK: one HTTP
        # request per attempt keeps attempts, history and cost accounting honest.
        # base_url: None lets the SDK read ANTHROPIC_BASE_URL.
        self._sdk = anthropic.Anthropic(api_key=key, max_retries=0, timeout=timeout_s)

    def complete(self, prefix: Sequence[str], body: str, *, model: str, max_tokens: int) -> Completion:
        system: list[TextBlockParam] = [{"type": "text", "text": block} for block in prefix]
        if system:
            system[-1]["cache_control"] = {"type": "ephemeral"}
        try:
            msg = self._sdk.messages.create(
                model=model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": body}],
            )
        except anthropic.APIStatusError as exc:
            raise status_failure(
                self.provider, exc.status_code, exc.body, exc.response.headers, self._secrets
            ) from None
        except anthropic.APIConnectionError as exc:
            raise connection_failure(self.provider, exc, self._secrets) from None
        except anthropic.APIResponseValidationError as exc:
            raise connection_failure(self.provider, exc, self._secrets) from None
        text = "".join(block.text for block in msg.content if block.type == "text")
        u = msg.usage
        tokens = dict(
            input_tokens=u.input_tokens or 0,
            cache_write_tokens=u.cache_creation_input_tokens or 0,
            cache_read_tokens=u.cache_read_input_tokens or 0,
            output_tokens=u.output_tokens or 0,
        )
        return Completion(
            text=text,
            model=msg.model,
            stop_reason=msg.stop_reason,
            usage=Usage(
                calls=1,
                cost_usd=cost_usd(model, **tokens),
                cache_savings_usd=cache_savings_usd(model, **tokens),
                **tokens,
            ),
        )
