"""Small text helpers shared by prompt building and the working-memory block."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters: whitespace collapsed, an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
