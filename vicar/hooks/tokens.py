"""The hook tokens: what a hook shows the inbox's endpoint to open gates for a principal.

One token per principal, `<data dir>/hook-tokens/<principal>` (made 0600 on first use by
`vicar hook token --principal P` or `vicar hook install`): the token chooses the
principal, so one inbox serves the hooks of every principal it has a token for. The
first version's single token (VICAR_HOOK_TOKEN, or `<data dir>/hook-token`) still opens
gates for VICAR_HOOK_PRINCIPAL. A hook token opens gates; it answers none, and it is not
an inbox account's token (those answer)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from vicar.models import check_principal
from vicar.settings import ReadAtUse, Settings, secret

TOKEN_VAR, TOKEN_FILE, TOKENS_DIR = "VICAR_HOOK_TOKEN", "hook-token", "hook-tokens"
MIN_TOKEN_CHARS = 16
MAX_TOKEN_CHARS = 200


def _make_once(path: Path) -> None:
    """A new token at `path`, 0600: written aside, then linked, so a half-written token is
    never read and the first of two processes wins."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def _read(path: Path) -> str:
    from vicar.errors import InvalidInput

    token = path.read_text().strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"{path}: the hook token must have at least {MIN_TOKEN_CHARS} characters")
    return token


def hook_token(settings: Settings, create: bool = True) -> tuple[str, Path | None]:
    """The first version's single token: (token, the file it is in, if any):
    VICAR_HOOK_TOKEN, else `<data dir>/hook-token`, made 0600 on first use (with `create`;
    else FileNotFoundError)."""
    from vicar.errors import InvalidInput

    raw = secret(ReadAtUse().hook_token)
    if raw:
        if len(raw) < MIN_TOKEN_CHARS:
            raise InvalidInput(f"{TOKEN_VAR} must have at least {MIN_TOKEN_CHARS} characters")
        return raw, None
    path = settings.data_dir / TOKEN_FILE
    if not path.exists() and create:
        _make_once(path)
    return _read(path), path


def tokens_dir(settings: Settings) -> Path:
    return settings.data_dir / TOKENS_DIR


def principal_token(settings: Settings, principal: str) -> tuple[str, Path]:
    """The principal's own hook token and its file, made 0600 on first use."""
    path = tokens_dir(settings) / check_principal(principal)
    if not path.exists():
        _make_once(path)
    return _read(path), path


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def principal_for(settings: Settings, given: str) -> tuple[bool, str | None]:
    """(whether the token is a hook token, the principal it opens gates for). Compared in
    constant time against every token: a principal's own, then the single token (whose
    principal is VICAR_HOOK_PRINCIPAL, None when unset)."""
    given = given.strip()
    if not given or len(given) > MAX_TOKEN_CHARS:
        return False, None
    want = _digest(given)
    found: str | None = None
    matched = False
    folder = tokens_dir(settings)
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or not path.is_file() or path.is_symlink() or not _principal(path.name):
                continue
            try:
                token = path.read_text().strip()
            except (OSError, UnicodeError):
                continue
            if len(token) >= MIN_TOKEN_CHARS and hmac.compare_digest(_digest(token), want) and not matched:
                matched, found = True, path.name
    if matched:
        return True, found
    try:
        single, _ = hook_token(settings, create=False)
    except Exception:  # noqa: BLE001  (a bad single token opens nothing; the principals' tokens still work)
        return False, None
    if hmac.compare_digest(_digest(single), want):
        return True, settings.hook.principal
    return False, None


def _principal(name: str) -> bool:
    try:
        check_principal(name)
    except Exception:  # noqa: BLE001  (InvalidInput: a stray file, not a principal's token)
        return False
    return True
