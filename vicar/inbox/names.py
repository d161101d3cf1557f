"""Where the inbox keeps its accounts and sessions, and the one check of an account's
name before it becomes a path component (shared by accounts and sessions)."""

from __future__ import annotations

from pathlib import Path

from vicar.errors import InvalidInput
from vicar.memory.names import check_name
from vicar.models import check_responder


def inbox_dir(data_dir: Path) -> Path:
    return data_dir / "inbox"


def users_dir(data_dir: Path) -> Path:
    return inbox_dir(data_dir) / "users"


def checked_user_name(name: str) -> str:
    """The account's name as one safe path component; InvalidInput otherwise."""
    try:
        check_responder(name)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return check_name(name, "inbox user")
