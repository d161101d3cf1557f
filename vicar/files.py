"""Small file helpers shared by the outcome artifacts and the responder allow-list."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
