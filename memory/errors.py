"""The errors the memory raises: the base of Vicar's user-facing errors. Each carries
the exit code the CLI ends with; vicar/errors.py lists every code and adds the kinds
the memory never raises."""

from __future__ import annotations


class VicarError(Exception):
    exit_code = 1


class InvalidInput(VicarError, ValueError):
    """Also a ValueError, so pydantic validators can raise it."""

    exit_code = 2


class Conflict(VicarError):
    exit_code = 5


class BrokenStore(VicarError):
    exit_code = 6


class StoreError(BrokenStore):
    """A store that cannot be used as asked: shown to the user as one line (exit code 6)."""


class NotInstalled(VicarError):
    exit_code = 9
