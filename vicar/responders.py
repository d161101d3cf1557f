"""Who may answer for a principal: an allow-list kept beside their memory,
`<principals_dir>/<principal>/responders.json` ({"responders": [...]}).

An empty list (or no file) means anyone who can reach the gate may answer. The names
are asserted by the answering client, not authenticated: who can signal or update a
gate at all is the Temporal server's business (mTLS or API keys, namespace permissions).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from vicar.errors import VicarError
from vicar.files import atomic_write
from vicar.memory.names import child_path
from vicar.models import check_responder

RESPONDERS_FILE = "responders.json"
MAX_RESPONDERS = 100
# A hand-edited file could be anything; a full list is a few kilobytes.
MAX_FILE_BYTES = 64 * 1024


class AllowList(BaseModel):
    responders: list[str] = Field(default_factory=list, max_length=MAX_RESPONDERS)

    @field_validator("responders")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return sorted({check_responder(n) for n in v})


def _reason(exc: ValidationError) -> str:
    e = exc.errors()[0]
    return str(e.get("ctx", {}).get("error") or e["msg"])


def checked(names: list[str]) -> list[str]:
    """The names as stored (trimmed, sorted, unique); a bad one is a VicarError."""
    try:
        return AllowList(responders=names).responders
    except ValidationError as exc:
        raise VicarError(_reason(exc)) from None


def responders_path(principals_dir: Path, principal: str) -> Path:
    return child_path(principals_dir, principal) / RESPONDERS_FILE  # InvalidInput (exit 2) if bad


def load_allowed(principals_dir: Path, principal: str) -> list[str]:
    """The allowed responders, sorted; [] when anyone may answer."""
    path = responders_path(principals_dir, principal)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise VicarError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise VicarError(f"{path} is larger than {MAX_FILE_BYTES} bytes: not an allow-list")
    try:
        return AllowList.model_validate_json(raw).responders
    except ValidationError as exc:
        raise VicarError(f"{path} is not a valid allow-list: {_reason(exc)}") from None


def save_allowed(principals_dir: Path, principal: str, names: list[str]) -> list[str]:
    """Write the list (temp file + rename: a gate never reads a torn file); returns it."""
    allowed = checked(names)
    path = responders_path(principals_dir, principal)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, AllowList(responders=allowed).model_dump_json(indent=1) + "\n")
    return allowed
