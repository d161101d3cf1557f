"""A principal's rules and pauses kept beside their memory (the store's meta table), so
a brain that is terminated (an operator may terminate a broken one) and started again
takes them back instead of starting with none. The brain holds the Control; this is
its copy, written after each change and read when a brain starts afresh."""

from __future__ import annotations

from pydantic import ValidationError

from vicar.memory.store import RecordStore
from vicar.models.control import Control

META_KEY = "human_control"  # the rules and pauses, as JSON


def keep_control(store: RecordStore, control: Control) -> bool:
    """Write `control` unless the store holds the same or a later version (two changes'
    writes may land out of order; a retry writes nothing). True if written."""
    with store.transaction(chunk_rows_kept=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
        if row is not None and _parse(row[0]).version >= control.version:
            return False
        db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (META_KEY, control.model_dump_json()),
        )
        return True


def kept_control(store: RecordStore) -> Control | None:
    with store.reading() as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    return _parse(row[0]) if row is not None else None


def _parse(raw: str) -> Control:
    try:
        return Control.model_validate_json(raw)
    except ValidationError as exc:
        # Fail closed: rules that cannot be read must not turn into no rules.
        raise ValueError(f"the principal's kept rules cannot be read ({exc.error_count()} errors)") from None
