"""Inbox sessions kept on the server: the signed cookie names a session, and the session
is alive only while its record is on disk, `<data_dir>/inbox/sessions/<account>/<hash>`
(the SHA-256 of the session's random id; the id itself is only in the cookie). Signing
out removes the record, so a cookie copied before then opens nothing after; a record
older than the session's lifetime is dead whatever the cookie says. Each account keeps
at most MAX_PER_ACCOUNT records: a new sign-in past that ends the oldest session.

Records are files, not memory, so every inbox serving one data directory agrees, and a
restart keeps who is signed in."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from vicar.errors import InvalidInput
from vicar.inbox.names import checked_user_name, inbox_dir

SESSION_DAYS = 14
LIFETIME_SECONDS = SESSION_DAYS * 86400
MAX_PER_ACCOUNT = 20
SID_BYTES = 32
_RECORD_RE = re.compile(r"[0-9a-f]{64}")


def _account_dir(data_dir: Path, name: str) -> Path:
    base = inbox_dir(data_dir) / "sessions"
    path = base / checked_user_name(name)
    if path.resolve().parent != base.resolve():
        raise InvalidInput(f"inbox sessions of {name!r}: {path} resolves outside {base}")
    return path


def _record(data_dir: Path, name: str, sid: str) -> Path:
    return _account_dir(data_dir, name) / hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()


def open_session(data_dir: Path, name: str) -> str:
    """A new session for the account: its id, for the cookie only."""
    folder = _account_dir(data_dir, name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    sid = secrets.token_urlsafe(SID_BYTES)
    fd = os.open(_record(data_dir, name, sid), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    _prune(folder)
    return sid


def _prune(folder: Path) -> None:
    """Drop dead records, then the oldest past MAX_PER_ACCOUNT (their sessions end)."""
    now = time.time()
    alive: list[tuple[float, Path]] = []
    for path in folder.iterdir():
        if not _RECORD_RE.fullmatch(path.name):
            continue
        try:
            opened = path.stat().st_mtime
        except FileNotFoundError:
            continue
        if now - opened > LIFETIME_SECONDS:
            path.unlink(missing_ok=True)
        else:
            alive.append((opened, path))
    alive.sort()
    for _, path in alive[: max(len(alive) - MAX_PER_ACCOUNT, 0)]:
        path.unlink(missing_ok=True)


def session_alive(data_dir: Path, name: str, sid: str) -> bool:
    if not sid or len(sid) > 100:
        return False
    try:
        opened = _record(data_dir, name, sid).stat().st_mtime
    except (OSError, InvalidInput):
        return False
    return time.time() - opened <= LIFETIME_SECONDS


def close_session(data_dir: Path, name: str, sid: str) -> None:
    with contextlib.suppress(InvalidInput):
        _record(data_dir, name, sid).unlink(missing_ok=True)


def close_all(data_dir: Path, name: str) -> None:
    """Every session of the account ends (a new token, or the account removed)."""
    with contextlib.suppress(InvalidInput):
        shutil.rmtree(_account_dir(data_dir, name), ignore_errors=True)
