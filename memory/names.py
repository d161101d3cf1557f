"""Names that become paths: a principal's name (its memory's directory), a move's id
(its staging directory). Each is checked where the path is built, not only where the
CLI parses it: workflow inputs and backup manifests reach here too."""

from __future__ import annotations

import re
from pathlib import Path

from vicar.memory.errors import InvalidInput

PRINCIPAL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")  # \Z: "$" lets a trailing newline through
# One path component: a leading letter or digit keeps out ".", "..", hidden names and options.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}\Z")


def _shown(value: object) -> str:
    return repr(value)[:80]  # a hostile name may be megabytes long


def check_principal(value: str) -> str:
    if not isinstance(value, str) or not PRINCIPAL_RE.match(value):
        raise InvalidInput(
            f"invalid principal {_shown(value)}: use 1-64 characters of letters, digits, '.', '_', '@', '-'"
        )
    return value


def check_name(value: str, what: str) -> str:
    """Any other id that names a directory (a move id)."""
    if what == "principal":
        return check_principal(value)
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidInput(
            f"invalid {what} {_shown(value)}: use 1-128 characters of letters, digits, "
            f"'.', '_', '@', '-', starting with a letter or digit"
        )
    return value


def child_path(base: Path, name: str, what: str = "principal") -> Path:
    """base/name, for a name that is one safe path component and a result that stays
    under base once symlinks are resolved (a directory linked elsewhere would let a
    write or a delete land outside the data directory)."""
    path = base / check_name(name, what)
    root = base.resolve()
    real = path.resolve()
    if real.parent != root:
        raise InvalidInput(f"{what} {_shown(name)}: {path} resolves to {real}, outside {root}")
    return path
