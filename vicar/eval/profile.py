"""The evaluation profile: the research switches of the design's mechanisms, which the
replay's variants set and the product does not read from its environment.

Each switch is a field of the product's settings (its default the shipped value, chosen
by a replay sweep: docs/design-decisions.md, "Which mechanisms are on"); a profile names
the ones a variant changes, None leaving the shipped value. Applied, the values are
validated by the product's own models, so a profile can set nothing they refuse.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from vicar.settings import Settings


class EvalProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probation_answers: int | None = Field(
        None,
        description="a gate naming an upstream agent is never answered alone until the human has answered "
        "this many of that agent's artifacts (0: off)",
    )
    trust_floor: float | None = Field(
        None, description="an upstream agent whose trust score is below this is never answered alone (0: off)"
    )
    regret_window: int | None = Field(
        None,
        description="regret: a human correction finds the proxy's approvals on the same lineage this many "
        "interactions back (0: off; 100 when on)",
    )
    censor_min: int | None = Field(
        None,
        description="censors are learned once the human has turned back this many alike artifacts of one "
        "context (0: off; 3 when on)",
    )
    censor_similarity: float | None = Field(None, description="how alike (mean cosine) those artifacts must be")
    preferences: bool | None = Field(None, description="learn the human's preferences from the concerns they repeat")
    procedures: bool | None = Field(None, description="learn the checks the human keeps running")
    hindsight_factor: float | None = Field(
        None,
        description="how much further a disconfirmation moves a fact's confidence than a confirmation (1: symmetric)",
    )
    storage: bool | None = Field(None, description="the storage decision for new gate chunks (off keeps every one)")
    trust_feature: bool | None = Field(None, description="the learned model reads the upstream agent's trust score")

    # The Settings section each switch belongs to.
    SECTION: ClassVar[dict[str, str]] = {
        "probation_answers": "calibration",
        "trust_floor": "calibration",
        "regret_window": "calibration",
        "censor_min": "calibration",
        "censor_similarity": "calibration",
        "preferences": "facts",
        "procedures": "facts",
        "hindsight_factor": "facts",
        "storage": "memory",
        "trust_feature": "predictor",
    }

    @classmethod
    def shipped(cls) -> dict[str, object]:
        """Every switch's shipped value: the default of its field in the product's settings."""
        sections = {s: Settings.model_fields[s].get_default(call_default_factory=True) for s in cls.SECTION.values()}
        return {name: getattr(sections[section], name) for name, section in cls.SECTION.items()}

    def apply(self, settings: Settings) -> Settings:
        """`settings` with this profile's switches set."""
        changed: dict[str, dict[str, object]] = {}
        for name, value in self.model_dump(exclude_none=True).items():
            changed.setdefault(self.SECTION[name], {})[name] = value
        update = {}
        for section, values in changed.items():
            model = getattr(settings, section)
            update[section] = type(model).model_validate({**model.model_dump(), **values})
        return settings.model_copy(update=update)
