"""Inbox accounts: one file per responder under `<data_dir>/inbox/users/`, holding the
hash of their personal token (never the token) and the principals they answer for; the
session secret beside them, generated once and readable by its owner only. What a
principal lets an account do is the principal's allow-list, read strictly here
(vicar.responders: a principal without one is answered in the inbox by itself only)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from vicar.errors import InvalidInput, NotFound, VicarError
from vicar.files import atomic_write, read_bounded
from vicar.inbox.names import checked_user_name, inbox_dir, users_dir
from vicar.inbox.sessions import close_all
from vicar.models import check_principal, check_responder

__all__ = ["Account", "checked_user_name", "inbox_dir", "users_dir"]

MAX_USER_FILE_BYTES = 64 * 1024
TOKEN_BYTES = 32
SECRET_FILE = "session.key"


class Account(BaseModel):
    name: str
    # sha256 of the token: the token is 256 random bits, so a slow hash adds nothing.
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    # Empty: every principal that lets this name in (docs/identity.md#who-may-answer-in-the-inbox).
    principals: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_responder(v)

    @field_validator("principals")
    @classmethod
    def _principals(cls, v: list[str]) -> list[str]:
        return sorted({check_principal(p) for p in v})

    @property
    def session_key(self) -> str:
        """What a session carries to prove it was opened with the current token: a new
        token (`user add` again) or a removed account ends every older session."""
        return self.token_sha256[:16]

    def answers_for(self, principal: str) -> bool:
        return not self.principals or principal in self.principals


def _user_path(data_dir: Path, name: str) -> Path:
    base = users_dir(data_dir)
    # A name is one safe path component, and the file stays under the data dir once resolved.
    path = base / f"{checked_user_name(name)}.json"
    if path.resolve().parent != base.resolve() or not base.resolve().is_relative_to(data_dir.resolve()):
        raise InvalidInput(f"inbox user {name!r}: {path} resolves outside {base}")
    return path


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def add_user(data_dir: Path, name: str, principals: list[str]) -> tuple[Account, str]:
    """Create (or re-issue) an account; returns it and its new token, shown only now."""
    path = _user_path(data_dir, name)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    try:
        account = Account(name=name, token_sha256=token_hash(token), principals=principals)
    except ValidationError as exc:
        raise InvalidInput(str(exc.errors()[0].get("ctx", {}).get("error") or exc.errors()[0]["msg"])) from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, account.model_dump_json(indent=1) + "\n")
    os.chmod(path, 0o600)
    _end_sessions(data_dir, name)  # the old token's sessions would be refused anyway: drop their records
    return account, token


def remove_user(data_dir: Path, name: str) -> None:
    path = _user_path(data_dir, name)
    try:
        path.unlink()
    except FileNotFoundError:
        raise NotFound(f"no inbox user {name!r}") from None
    _end_sessions(data_dir, name)


def _end_sessions(data_dir: Path, name: str) -> None:
    close_all(data_dir, name)


def load_user(data_dir: Path, name: str) -> Account | None:
    try:
        path = _user_path(data_dir, name)
    except InvalidInput:
        return None
    return _read(path)


def _read(path: Path) -> Account | None:
    raw = read_bounded(path, MAX_USER_FILE_BYTES, "an inbox account")
    if raw is None:
        return None
    try:
        return Account.model_validate_json(raw)
    except ValidationError:
        raise VicarError(f"{path} is not a valid inbox account") from None


def list_users(data_dir: Path) -> list[Account]:
    base = users_dir(data_dir)
    if not base.is_dir():
        return []
    found = (_read(p) for p in sorted(base.glob("*.json")) if p.is_file() and not p.is_symlink())
    return [a for a in found if a is not None]


def user_for_token(data_dir: Path, token: str) -> Account | None:
    """The account this token opens, compared in constant time against every one."""
    if not token or len(token) > 200:
        return None
    given = token_hash(token.strip())
    match = None
    for account in list_users(data_dir):
        if hmac.compare_digest(account.token_sha256, given):
            match = account
    return match


def session_secret(data_dir: Path) -> str:
    """The key that signs session cookies: made once, mode 0600, never printed."""
    path = inbox_dir(data_dir) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        # Written whole under a private name, then linked into place: link() fails if the
        # key exists, so two inboxes starting at once agree on one key, and neither ever
        # reads a key file that is still being written.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".session-key-")
        try:
            with os.fdopen(fd, "w") as f:  # mkstemp made it 0600
                f.write(secrets.token_urlsafe(48) + "\n")
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    secret = path.read_text().strip()
    if len(secret) < 32:
        raise VicarError(f"{path} holds no usable session key: remove it to make a new one")
    return secret
