"""What a workflow answers to by name, for the registries vicar/contracts/__init__.py
computes: its workflow type, the signals, updates and queries it handles, and the patch
ids its code branches on (none since the protocol baseline; docs/development.md says
how a later change is versioned)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Handles:
    workflow: str
    signals: tuple[str, ...] = ()
    updates: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()


def unique(names: Iterable[str]) -> tuple[str, ...]:
    """Each name once, in the order first seen (several workflows handle the turn's signals)."""
    return tuple(dict.fromkeys(names))
