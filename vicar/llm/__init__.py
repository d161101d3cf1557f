"""LLM provider clients for the proxy's predictor. Imported by activities only (never by
workflow code): the SDKs make network calls."""

from vicar.llm.base import REQUEST_ERROR, TRANSIENT_ERROR, Completion, LLMClient
from vicar.llm.choice import LLMChoice, make_client

__all__ = ["Completion", "LLMChoice", "LLMClient", "REQUEST_ERROR", "TRANSIENT_ERROR", "make_client"]
