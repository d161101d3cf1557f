"""Artifacts by reference: files a gate names instead of inlining them.

The worker reads them for the proxy, and an LLM predictor sends them to its provider,
so a gate must not be able to name any file on the host: only files under the
configured roots (VICAR_ARTIFACT_ROOTS) are read. The real path (symlinks and `..`
resolved) must lie inside a root; the file is opened without blocking (a FIFO would
hold a worker thread for good) and must be a regular file; at most a capped number
of bytes is read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from vicar.config import Settings
from vicar.errors import InvalidInput
from vicar.models import GateRequest

READ_BLOCK = 1 << 16


class ArtifactRefused(InvalidInput):
    """An artifact path that is not read: the proxy must not decide without its artifact."""


def _inside(real: str, roots: Sequence[Path]) -> bool:
    return any(os.path.commonpath([real, root]) == root for root in map(os.path.realpath, roots))


def confine(path: str, roots: Sequence[Path]) -> str:
    """The real path of `path` if it lies under one of `roots` (real paths); refused otherwise."""
    if "\x00" in path:
        raise ArtifactRefused(f"artifact path {path!r} is not a valid path")
    real = os.path.realpath(path)
    if not _inside(real, roots):
        resolved = f" (resolves to {real!r})" if real != os.path.abspath(path) else ""
        where = (
            f"outside the artifact roots {os.pathsep.join(map(str, roots))}"
            if roots
            else "not allowed: no artifact roots are configured"
        )
        raise ArtifactRefused(
            f"artifact path {path!r}{resolved} is {where}; add its directory to VICAR_ARTIFACT_ROOTS to allow it"
        )
    return real


def read_artifact_file(path: str, roots: Sequence[Path], max_bytes: int) -> str:
    """At most `max_bytes` of a regular file under a root, decoded as UTF-8 (bad bytes replaced)."""
    real = confine(path, roots)
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOFOLLOW: the last
        # component cannot have become a symlink since it was resolved.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ArtifactRefused(f"artifact path {path!r} cannot be opened: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactRefused(f"artifact path {path!r} is not a regular file")
        # A directory on the way may have been swapped for a symlink after it was
        # resolved: check where the open file really is (Linux).
        link = f"/proc/self/fd/{fd}"
        if os.path.islink(link) and not _inside(os.readlink(link), roots):
            raise ArtifactRefused(f"artifact path {path!r} moved outside the artifact roots while opened")
        parts: list[bytes] = []
        left = max_bytes
        while left > 0:
            block = os.read(fd, min(left, READ_BLOCK))
            if not block:
                break
            parts.append(block)
            left -= len(block)
    except OSError as exc:
        raise ArtifactRefused(f"artifact path {path!r} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return b"".join(parts).decode("utf-8", errors="replace")


def load_artifact(request: GateRequest, settings: Settings) -> str:
    """The artifact text plus the contents of its paths (under the settings' roots and
    byte cap). A path that cannot be read raises ArtifactRefused: the proxy must not
    decide without its artifact."""
    parts = [request.artifact_text] if request.artifact_text else []
    for p in request.artifact_paths:
        parts.append(f"--- {p}\n" + read_artifact_file(p, settings.artifact_roots, settings.limits.artifact_file_bytes))
    return "\n".join(parts)
