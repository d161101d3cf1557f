"""The memory chunk of the design and the texts its embedding dimensions are made from."""

from __future__ import annotations

import hashlib
from enum import Enum

from pydantic import BaseModel, Field

# The independent embedding dimensions of a chunk (design: MemoryChunk), and the single
# blended embedding of all its text, the alternative the ablations compare against.
DIMENSIONS = ("situation", "artifact", "stimulus", "response", "salience")
BLENDED = "blended"
ARTIFACT_EMBED_CHARS = 2000  # MiniLM reads 256 tokens; more text only costs time


class ChunkKind(str, Enum):
    gate = "gate"  # a gate episode
    question = "question"  # an agent's question and the human's answer
    preference = "preference"
    procedure = "procedure"
    censor = "censor"


# The kinds that hold what the person's answers taught (vicar/proxy/facts.py), not an answer.
FACT_KINDS = (ChunkKind.preference.value, ChunkKind.procedure.value)


class MemoryChunk(BaseModel):
    id: str
    principal: str
    kind: ChunkKind = ChunkKind.gate
    state: str
    task_type: str
    outcome: str
    answered_by: str  # "human" | "proxy"
    responder: str | None = None
    gate_id: str = ""
    question: str = ""
    artifact_excerpt: str = ""
    actor_message: str = ""
    upstream_agent: str | None = None
    prior_confidence: float | None = None
    prior_prose: str = ""
    posterior_confidence: float | None = None
    posterior_prose: str = ""
    surprise_description: str = ""
    salient_percepts: list[str] = Field(default_factory=list)
    human_response: str = ""
    created_n: int
    traces: list[int] = Field(default_factory=list)
    status: str = "active"  # "superseded": kept, marked, left out of retrieval
    superseded_by: str | None = None
    # The artifact's thread across revisions (a topic branch, a patch and its rerolls),
    # its revision and a hash of the whole artifact the gate saw: the reviewer's last
    # verdict on the same lineage, and whether the artifact changed since, are looked up
    # exactly, not by similarity. "" when unknown; a chunk without a lineage never matches.
    lineage: str = ""
    revision: str = ""
    artifact_hash: str = ""

    def dimension_texts(self) -> dict[str, str]:
        """Text per embedding dimension; absent dimensions are left out, not empty."""
        texts = {
            "situation": situation_text(self.state, self.task_type, self.question),
            "artifact": self.artifact_excerpt[:ARTIFACT_EMBED_CHARS],
            "stimulus": self.actor_message,
            "response": self.human_response,
            "salience": " ".join([self.surprise_description, *self.salient_percepts]).strip(),
        }
        return {k: v for k, v in texts.items() if v.strip()}

    def vector_texts(self, blended: bool = True) -> dict[str, str]:
        """Every text Vicar embeds for this chunk: its dimensions plus (`blended`) the
        blended one."""
        texts = self.dimension_texts()
        if texts and blended:
            texts[BLENDED] = blended_text(texts)
        return texts


def blended_text(texts: dict[str, str]) -> str:
    """One text of all dimensions (the design's blended_text_from_fields)."""
    return "\n".join(texts[d] for d in DIMENSIONS if texts.get(d, "").strip())[:ARTIFACT_EMBED_CHARS]


def situation_text(state: str, task_type: str, question: str) -> str:
    return f"{state} {task_type}: {question}"


def chunk_id_for(principal: str, workflow_id: str) -> str:
    """Deterministic id from the gate's workflow id, so a retried store writes once."""
    digest = hashlib.sha256(f"{principal}\x00{workflow_id}".encode()).hexdigest()[:32]
    return f"c-{digest}"
