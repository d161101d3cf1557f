"""The coding-agent hook's settings (vicar/hooks, docs/claude-code.md): whom its gates are
for and how long a hook waits for the person before the agent asks them itself."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vicar.memory.names import check_principal

# A day: Claude Code kills a hook at its own `timeout` (600 s unless set) anyway.
MAX_HOOK_WAIT_SECONDS = 86_400.0


class HookParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # None: the hook cannot open a gate and every call falls back to the agent's prompt.
    principal: str | None = None
    wait_seconds: float = Field(120.0, ge=0.0, le=MAX_HOOK_WAIT_SECONDS, allow_inf_nan=False)

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str | None) -> str | None:
        return None if v is None else check_principal(v)
