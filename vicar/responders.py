"""Who may answer for a principal: an allow-list kept beside their memory,
`<principals_dir>/<principal>/responders.json` ({"responders": [...], "anyone": false}),
with every change appended to `responders.log` beside it (who, when, what).

One rule on every surface (a gate's own check of each answer, whatever client sent it:
`vicar answer`, the Python client, the `respond` update, the signal; the inbox, Slack,
reviews): closed by default. No file: the principal never had a list, and only the
principal's own name answers or reviews for it; anyone else is let in by someone's
explicit choice, never by a list nobody wrote (docs/identity.md). A list emptied by
removals means nobody may answer: only an operator's explicit reset (`vicar principal
allow P --anyone`, which sets "anyone") opens the principal again, to everyone and
everywhere, so taking off the last name never silently opens it. Gates read the list
when an answer comes, not when they escalate.

The names are asserted by the answering client; the Temporal identity the answer came
with is recorded beside it, and a deployment can require the two to agree
(docs/identity.md). Who can signal or update a gate at all is the Temporal server's
business (mTLS or API keys, namespace permissions).
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator

from vicar.errors import VicarError
from vicar.files import atomic_write, read_bounded
from vicar.memory.names import child_path
from vicar.models import check_responder

RESPONDERS_FILE = "responders.json"
CHANGES_FILE = "responders.log"
MAX_RESPONDERS = 100
# A hand-edited file could be anything; a full list is a few kilobytes.
MAX_FILE_BYTES = 64 * 1024


class AllowList(BaseModel):
    responders: list[str] = Field(default_factory=list, max_length=MAX_RESPONDERS)
    # Set only by an operator's explicit reset: with no names, anyone may answer.
    anyone: bool = False
    # Never stored nor read from a file: the principal has no list at all (UNSET).
    _unset: bool = PrivateAttr(False)

    @field_validator("responders")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return sorted({check_responder(n) for n in v})

    def refusal(self, principal: str, responder: str) -> str | None:
        """Why `responder` may not answer (or review) for `principal` (None: they may)."""
        if self._unset:
            if responder == principal:
                return None
            return (
                f"{responder!r} may not answer for {principal}: {principal} has no allow-list, so only "
                f"{principal} does (an operator lets {responder} in with `vicar principal allow {principal} "
                f"{responder}`, or everyone with `vicar principal allow {principal} --anyone`)"
            )
        if self.responders:
            if responder in self.responders:
                return None
            return f"{responder!r} may not answer for {principal}; allowed: {', '.join(self.responders)}"
        if self.anyone:
            return None
        return (
            f"nobody may answer for {principal}: their allow-list was emptied "
            f"(an operator reopens it with `vicar principal allow {principal} NAME` or `--anyone`)"
        )

    def closed_refusal(self, principal: str, responder: str) -> str | None:
        """The same rule (the inbox, Slack and reviews were closed before the gate was)."""
        return self.refusal(principal, responder)


UNSET = AllowList()  # a principal that never had a list: its own name only
UNSET._unset = True


def has_no_list(policy: AllowList) -> bool:
    return policy._unset


def _reason(exc: ValidationError) -> str:
    e = exc.errors()[0]
    return str(e.get("ctx", {}).get("error") or e["msg"])


def checked(names: list[str]) -> list[str]:
    """The names as stored (trimmed, sorted, unique); a bad one is a VicarError."""
    try:
        return AllowList(responders=names).responders
    except ValidationError as exc:
        raise VicarError(_reason(exc)) from None


def responders_path(principals_dir: Path, principal: str) -> Path:
    # InvalidInput (exit 2): the name, or a memory directory linked out of the data dir.
    return child_path(principals_dir, principal) / RESPONDERS_FILE


def load_policy(principals_dir: Path, principal: str) -> AllowList:
    """The principal's list as stored; UNSET when there is none."""
    path = responders_path(principals_dir, principal)
    raw = read_bounded(path, MAX_FILE_BYTES, "an allow-list")
    if raw is None:
        return UNSET
    try:
        return AllowList.model_validate_json(raw)
    except ValidationError as exc:
        raise VicarError(f"{path} is not a valid allow-list: {_reason(exc)}") from None


def load_allowed(principals_dir: Path, principal: str) -> list[str]:
    """The allowed responders' names, sorted ([] for an open or an emptied list)."""
    return load_policy(principals_dir, principal).responders


def save_allowed(principals_dir: Path, principal: str, names: list[str], *, anyone: bool = False) -> list[str]:
    """Write the list (temp file + rename: a gate never reads a torn file); returns it."""
    allowed = checked(names)
    path = responders_path(principals_dir, principal)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, AllowList(responders=allowed, anyone=anyone and not allowed).model_dump_json(indent=1) + "\n")
    return allowed


def change_allowed(
    principals_dir: Path, principal: str, change: str, names: Sequence[str] = (), by: str | None = None
) -> AllowList:
    """Apply one change ("allow" names, "disallow" names, or "anyone": the explicit reset),
    then append it to the log with who made it (`by`, else the OS user) and when."""
    if change not in ("allow", "disallow", "anyone"):
        raise VicarError(f"unknown allow-list change {change!r}")
    who = check_responder(by) if by else getpass.getuser()
    current = load_policy(principals_dir, principal)
    given = checked(list(names))
    if change == "allow":
        kept = current.responders + given
    elif change == "disallow":
        kept = [n for n in current.responders if n not in given]
    else:
        kept = []
    save_allowed(principals_dir, principal, kept, anyone=change == "anyone")
    after = load_policy(principals_dir, principal)
    entry = {
        "at": datetime.now(UTC).isoformat(),
        "by": who,
        "change": change,
        "names": given,
        "responders": after.responders,
        "anyone": after.anyone,
    }
    log = responders_path(principals_dir, principal).with_name(CHANGES_FILE)
    # Append-only and synced: the record of who opened or closed a principal outlives a crash.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return after
