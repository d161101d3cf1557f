"""Small file helpers shared by the outcome artifacts, the responder allow-list and the
inbox's accounts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vicar.errors import VicarError


def read_bounded(path: Path, limit: int, what: str) -> bytes | None:
    """A small file's bytes (None: there is none), or one line: a file larger than
    `limit` is not `what`, and reading past the limit costs nothing."""
    try:
        with path.open("rb") as f:
            raw = f.read(limit + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise VicarError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > limit:
        raise VicarError(f"{path} is larger than {limit} bytes: not {what}")
    return raw


def atomic_write(path: Path, text: str) -> None:
    """Temp file + rename: a reader never sees a torn file. No fsync: the artifacts are
    derived from the SQLite log (the source of truth), and the next write rebuilds
    whatever a power loss took; an fsync per gate cost more than the rest of the write.
    (An allow-list a power loss tore reads as invalid: gates then refuse every answer.)"""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
