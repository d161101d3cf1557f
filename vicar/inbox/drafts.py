"""The words of an answer taken back by Undo, kept for the gate's page: Undo returns to
the gate, and what the person typed (a reject's reason, a correction) is in its field
again instead of lost. One file per account and gate under `<data_dir>/inbox/drafts/`
(mode 0600: the words may be sensitive), read once; every inbox serving the data
directory sees it."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from vicar.inbox.names import checked_user_name, inbox_dir

MAX_DRAFT_BYTES = 256 * 1024  # the answer limit's words, percent-encoded, fit well inside
KEPT_SECONDS = 3600.0  # a draft nobody came back for within the hour is dropped


def _path(data_dir: Path, account: str, wid: str) -> Path:
    folder = inbox_dir(data_dir) / "drafts" / checked_user_name(account)
    return folder / f"{hashlib.sha256(wid.encode()).hexdigest()[:32]}.json"


def keep(data_dir: Path, account: str, wid: str, action: str, text: str) -> None:
    """Keep the words taken back from `wid` (nothing to keep: nothing written)."""
    if not text:
        return
    path = _path(data_dir, account, wid)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps({"action": action, "text": text, "at": time.time()}).encode()[:MAX_DRAFT_BYTES]
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    os.replace(tmp, path)


def take(data_dir: Path, account: str, wid: str) -> dict[str, str]:
    """The words kept for `wid` ({} : none), removed as they are read."""
    path = _path(data_dir, account, wid)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_DRAFT_BYTES + 1)
        path.unlink(missing_ok=True)
        kept = json.loads(raw)
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict) or time.time() - float(kept.get("at", 0)) > KEPT_SECONDS:
        return {}
    return {k: v for k, v in kept.items() if k in ("action", "text") and isinstance(v, str)}
