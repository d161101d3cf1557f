"""A principal's name: the name of its memory's directory, so checked before any path
is built from it."""

from __future__ import annotations

import re

from vicar.memory.errors import InvalidInput

PRINCIPAL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")  # \Z: "$" lets a trailing newline through


def check_principal(value: str) -> str:
    if not PRINCIPAL_RE.match(value or ""):
        raise InvalidInput(
            f"invalid principal {value!r}: use 1-64 characters of letters, digits, '.', '_', '@', '-'"
        )
    return value
