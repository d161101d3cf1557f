"""The session's working memory: the design's SESSION START.

At N, compute every chunk's base-level activation, keep those above tau, order them by
activation and fill a text block top-down until the token budget is spent. The block
is the cacheable prompt prefix every gate of the session reuses. Loading a chunk here
is not a retrieval: it adds no trace (the design removed that REINFORCE step to avoid
rich-get-richer).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from vicar.memory.chunk import MemoryChunk
from vicar.memory.principal import PrincipalMemory
from vicar.memory.text import clip

# Without the provider's tokenizer at hand, ~4 characters per token (English prose);
# the budget is a ceiling on an estimate, documented as such.
CHARS_PER_TOKEN = 4
ENTRY_TEXT_CHARS = 400


class WorkingMemory(BaseModel):
    n: int  # the interaction counter it was computed at
    block: str
    chunk_ids: list[str] = Field(default_factory=list)
    tokens: int = 0  # estimated
    budget: int = 0
    above_threshold: int = 0  # chunks that qualified, before the budget cut


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def entry(chunk: MemoryChunk, activation: float) -> str:
    if chunk.kind.value in ("preference", "procedure"):
        what = "the human wants" if chunk.kind.value == "preference" else "the human always checks"
        return (
            f"- {chunk.state} / {chunk.task_type} ({chunk.kind.value}, activation {activation:.2f}): "
            f"{what}: {clip(chunk.human_response, ENTRY_TEXT_CHARS)}"
        )
    lines = [f"- {chunk.state} / {chunk.task_type} ({chunk.kind.value}): {chunk.outcome} (activation {activation:.2f})"]
    if chunk.question.strip():
        lines.append(f"  asked: {clip(chunk.question, ENTRY_TEXT_CHARS)}")
    if chunk.human_response.strip():
        lines.append(f"  the human said: {clip(chunk.human_response, ENTRY_TEXT_CHARS)}")
    if chunk.surprise_description.strip():
        lines.append(f"  what surprised the proxy: {clip(chunk.surprise_description, ENTRY_TEXT_CHARS)}")
    return "\n".join(lines)


def load_working_memory(memory: PrincipalMemory, n: int, token_budget: int) -> WorkingMemory:
    """Human answers only (the proxy does not learn from itself), active chunks only."""
    p = memory.params
    index = memory.index
    with memory._lock:
        idx = index.candidates({"answered_by": "human", "status": "active"})
        if len(idx) == 0:
            return WorkingMemory(n=n, block="", budget=token_budget)
        act = index.activations(n, p.decay, p.age_floor, p.activation_mode)[idx]
        keep = act > p.threshold
        idx, act = idx[keep], act[keep]
        # Highest activation first; ties (same traces) by creation order for a stable block.
        order = np.lexsort((idx, -act))
        ranked = [(index.ids[idx[j]], float(act[j])) for j in order]
    chunks = {c.id: c for c in memory.store.get_chunks([cid for cid, _ in ranked])}
    parts: list[str] = []
    used: list[str] = []
    tokens = 0
    for cid, a in ranked:
        text = entry(chunks[cid], a)
        cost = estimate_tokens(text + "\n")
        if tokens + cost > token_budget:
            break  # top-down: a lower-activation chunk never displaces a higher one
        parts.append(text)
        used.append(cid)
        tokens += cost
    return WorkingMemory(
        n=n, block="\n".join(parts), chunk_ids=used, tokens=tokens, budget=token_budget, above_threshold=len(ranked)
    )
