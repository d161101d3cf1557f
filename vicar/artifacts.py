"""Artifacts by reference: files a gate names instead of inlining them.

The worker reads them for the proxy, and an LLM predictor sends them to its provider,
so a gate must not be able to name any file on the host: only files under the
configured roots (VICAR_ARTIFACT_ROOTS) are read. The real path (symlinks and `..`
resolved) must lie inside a root; the file is opened without blocking (a FIFO would
hold a worker thread for good) and must be a regular file with no other hard link (a
hard link inside a root may be a file outside it: nothing on the path says so); at
most a capped number of bytes is read.

A refusal is short, because it travels to the person (the gate's note, the excerpts,
the webhook): it names the path as given and the reason. Where the path resolved and
which roots are configured (a symlink's target can be another process's files, such as
/proc/<worker pid>/environ) stay in `detail`, which the worker logs and nobody else sees.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from vicar.errors import ArtifactRefused
from vicar.models import GateRequest
from vicar.settings import Settings

READ_BLOCK = 1 << 16
SHOWN_PATH_CHARS = 200
log = logging.getLogger(__name__)


def _shown(path: str) -> str:
    clipped = path[:SHOWN_PATH_CHARS] + ("…" if len(path) > SHOWN_PATH_CHARS else "")
    return repr(clipped)


def _refused(path: str, why: str, detail: str = "") -> ArtifactRefused:
    return ArtifactRefused(f"artifact path {_shown(path)} {why}", f"artifact path {path!r} {why}{detail}")


def _real(path: str) -> str:
    # realpath reads each link it meets: one swapped or removed meanwhile raises (lstat
    # saw a link, readlink found none), as does a working directory that is gone.
    try:
        return os.path.realpath(path)
    except OSError as exc:
        raise _refused(path, "changed while it was resolved", f": {exc}") from None


def _inside(real: str, roots: Sequence[Path]) -> bool:
    return any(os.path.commonpath([real, root]) == root for root in map(os.path.realpath, roots))


def confine(path: str, roots: Sequence[Path]) -> str:
    """The real path of `path` if it lies under one of `roots` (real paths); refused otherwise."""
    try:
        if "\x00" in path:
            raise ValueError("NUL")
        path.encode("utf-8", "surrogateescape")
    except (ValueError, AttributeError):
        raise _refused(str(path), "is not a valid path") from None
    real = _real(path)
    try:
        inside = bool(roots) and _inside(real, roots)
    except (OSError, ValueError) as exc:
        raise _refused(path, "changed while it was resolved", f": {exc}") from None
    if not inside:
        resolved = f" (resolves to {real!r})" if real != os.path.abspath(path) else ""
        if not roots:
            raise _refused(path, "is not allowed: no artifact roots are configured (VICAR_ARTIFACT_ROOTS)", resolved)
        raise _refused(
            path,
            "is outside the artifact roots; add its directory to VICAR_ARTIFACT_ROOTS to allow it",
            f"{resolved}; the roots: {os.pathsep.join(map(str, roots))}",
        )
    return real


def _check_open_file(fd: int, path: str, roots: Sequence[Path]) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _refused(path, "is not a regular file")
    if info.st_nlink > 1:
        raise _refused(
            path,
            "has another hard link: refused, since one may be a file outside the artifact roots",
            f" ({info.st_nlink} links, inode {info.st_ino})",
        )
    # A directory on the way may have been swapped for a symlink after it was
    # resolved: check where the open file really is (Linux).
    link = f"/proc/self/fd/{fd}"
    if os.path.islink(link):
        where = os.readlink(link)
        if not _inside(where, roots):
            raise _refused(path, "moved outside the artifact roots while it was opened", f" (to {where!r})")


def read_artifact_file(path: str, roots: Sequence[Path], max_bytes: int) -> str:
    """At most `max_bytes` of a regular file under a root, decoded as UTF-8 (bad bytes
    replaced). A refusal's details go to this process's log (the worker's)."""
    try:
        return _read(path, roots, max_bytes)
    except ArtifactRefused as exc:
        log.warning("refused: %s", exc.detail)
        raise


def _read(path: str, roots: Sequence[Path], max_bytes: int) -> str:
    real = confine(path, roots)
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOFOLLOW: the last
        # component cannot have become a symlink since it was resolved.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _refused(path, f"cannot be opened: {exc.strerror or type(exc).__name__}", f" ({real!r})") from None
    try:
        _check_open_file(fd, path, roots)
        parts: list[bytes] = []
        left = max_bytes
        while left > 0:
            block = os.read(fd, min(left, READ_BLOCK))
            if not block:
                break
            parts.append(block)
            left -= len(block)
    except OSError as exc:
        raise _refused(path, f"cannot be read: {exc.strerror or type(exc).__name__}", f" ({real!r})") from None
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
