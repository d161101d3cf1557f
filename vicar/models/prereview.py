"""The pre-review's item (vicar.proxy.prereview), apart so that vicar.models (the gate's
results and details carry the items) imports it without importing the proxy: pydantic
only, safe inside the Temporal workflow sandbox."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PreReviewItem(BaseModel):
    """One concern or question of the person's, as they said it, with its source."""

    text: str = Field(description="One sentence of the person's, verbatim after cleaning (tags, quoted code).")
    score: float = Field(description="Its rank score for this artifact (higher first).")
    chunk_id: str = Field(description="The memory chunk of the gate it was said on.")
    gate_id: str = Field("", description="The gate it was said on; empty when the memory did not record it.")
    n: int = Field(description="The interaction it was said at.")
    action: str = Field(description="The answer it came with (approve, correct, reject...).")
    lineage: bool = Field(False, description="Said on this artifact's own lineage.")
    similarity: float | None = Field(None, description="The retrieval similarity of its source.")
    concerns: list[str] = Field(default_factory=list, description="Its design concern categories.")
    touches: list[str] = Field(default_factory=list, description="What of it the artifact names.")
    merged: int = Field(1, description="Sources whose near-duplicate sentences were merged into it.")
    features: dict[str, float] = Field(default_factory=dict, description="The ranking's features.")
    cited: bool = Field(False, description="An LLM predictor cited it in its reply.")
    task_type: str = Field("", description="The task type of the gate it was said on (empty: not recorded).")
    other_work: bool = Field(False, description="Said on another kind of work than this gate's (another task type).")

    def source_note(self, gate_task_type: str) -> str:
        """What a reviewer must know of where it was said when that is not this kind of
        work ("said on a patch-bump gate, not docs"); "" when it is, or is not known."""
        if not self.other_work or not self.task_type:
            return ""
        return (
            f"said on a {self.task_type} gate, not {gate_task_type}"
            if gate_task_type
            else (f"said on a {self.task_type} gate")
        )
