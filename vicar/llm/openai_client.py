"""GPT through the official `openai` SDK (Chat Completions)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import openai

from vicar.errors import VicarError
from vicar.llm.base import Completion, connection_failure, status_failure
from vicar.llm.pricing import cache_savings_usd, cost_usd
from vicar.models import Usage

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0
# Joins the prefix blocks into the one system message; fixed, so the message (and
# OpenAI's automatic prefix cache key) stays byte-identical across calls.
PREFIX_SEPARATOR = "\n\n"


class OpenAIClient:
    """The prefix is the system message, the body the user message. OpenAI caches
    long shared prefixes on its own; the usage reports the cached part."""

    provider = "openai"

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        key = os.environ.get("OPENAI_API_KEY", "").strip()
        if not key:
            raise VicarError("the openai predictor needs OPENAI_API_KEY in the worker's environment")
        self._secrets = (key,)
        # Temporal retries the activity; the SDK must not retry inside an attempt.
        # base_url is left to the SDK, which reads OPENAI_BASE_URL.
        self._sdk = openai.OpenAI(api_key=key, max_retries=0, timeout=timeout_s)

    def complete(self, prefix: Sequence[str], body: str, *, model: str, max_tokens: int) -> Completion:
        messages: list[ChatCompletionMessageParam] = []
        if prefix:
            messages.append({"role": "system", "content": PREFIX_SEPARATOR.join(prefix)})
        messages.append({"role": "user", "content": body})
        try:
            resp = self._sdk.chat.completions.create(
                model=model,
                messages=messages,
                max_completion_tokens=max_tokens,
            )
        except openai.APIStatusError as exc:
            raise status_failure(
                self.provider, exc.status_code, exc.body, exc.response.headers, self._secrets
            ) from None
        except openai.APIConnectionError as exc:
            raise connection_failure(self.provider, exc, self._secrets) from None
        except openai.APIResponseValidationError as exc:
            raise connection_failure(self.provider, exc, self._secrets) from None
        choice = resp.choices[0] if resp.choices else None
        text = (choice.message.content or "") if choice else ""
        u = resp.usage
        if u is None:  # OpenAI always reports usage; a compatible server may not
            log.warning("openai: response for %s carried no usage; its tokens and cost are not counted", model)
        prompt = u.prompt_tokens if u else 0
        details = u.prompt_tokens_details if u else None
        cached = min((details.cached_tokens or 0) if details else 0, prompt)
        tokens = dict(
            input_tokens=prompt - cached,  # prompt_tokens counts the cached part too
            cache_write_tokens=0,  # no write premium: writes are billed as input above
            cache_read_tokens=cached,
            output_tokens=(u.completion_tokens or 0) if u else 0,
        )
        return Completion(
            text=text,
            model=resp.model,
            stop_reason=choice.finish_reason if choice else None,
            usage=Usage(
                calls=1,
                cost_usd=cost_usd(model, **tokens),
                cache_savings_usd=cache_savings_usd(model, **tokens),
                **tokens,
            ),
        )
