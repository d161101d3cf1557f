"""Answers held for a short undo (issue 37 item 4). A gate cannot take an answer back
once it has it (its workflow completes on the answer), so the inbox keeps an answer for
`undo_seconds` before it sends it: Undo inside that window deletes it and nothing was
ever sent; when the window closes the inbox sends it, as `vicar answer` would.

A held answer is a file under `<data_dir>/inbox/held/` written (and fsynced) before the
page says "held", so a server that stops keeps it and sends it when it starts again
(late, never lost). Sending claims the file by renaming it, so two inboxes serving one
data directory never both send it; a claim left by a process that died mid-send is
taken back after CLAIM_STALE_SECONDS (a second answer to a gate that has one is refused
by the gate, and said so). What became of each is one line the person sees on their
next page."""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vicar.inbox.names import checked_user_name, inbox_dir

HELD_ID_RE = re.compile(r"[0-9a-f]{32}")
CLAIM_STALE_SECONDS = 120.0  # a send takes seconds; a claim this old was left by a dead process
SAID_KEPT = 20  # lines kept per account until seen
MAX_HELD_BYTES = 1024 * 1024


@dataclass
class Held:
    id: str
    account: str
    action: str
    text: str
    due: float  # epoch seconds: sent from then on
    gates: dict[str, str] = field(default_factory=dict)  # workflow id -> its principal
    titles: dict[str, str] = field(default_factory=dict)  # workflow id -> its question (shown)

    def left(self) -> int:
        """Whole seconds until it is sent (0: being sent)."""
        return max(0, round(self.due - time.time()))

    def label(self) -> str:
        if len(self.gates) == 1:
            wid = next(iter(self.gates))
            return f"{self.action} {self.titles.get(wid) or wid}"
        return f"{self.action} {len(self.gates)} gates"


def write_private(path: Path, data: bytes) -> None:
    """Temp file (mode 0600) fsynced, renamed into place, the directory fsynced: once this
    returns, a crash or a power loss keeps the whole file or nothing of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def held_dir(data_dir: Path) -> Path:
    return inbox_dir(data_dir) / "held"


def _said_dir(data_dir: Path, account: str) -> Path:
    return held_dir(data_dir) / "said" / checked_user_name(account)


def _path(data_dir: Path, held_id: str, suffix: str = ".json") -> Path:
    if not HELD_ID_RE.fullmatch(held_id):
        raise ValueError(f"not a held answer's id: {held_id[:40]!r}")
    root = held_dir(data_dir).resolve()
    path = (root / f"{held_id}{suffix}").resolve()
    if path.parent != root:
        raise ValueError("a held answer's path left its directory")
    return path


def hold(data_dir: Path, held: Held) -> Held:
    """Keep `held` on disk (durably) until it is due."""
    checked_user_name(held.account)
    held_dir(data_dir).mkdir(parents=True, exist_ok=True)
    write_private(_path(data_dir, held.id), json.dumps(asdict(held)).encode())
    return held


def new_held(
    account: str, action: str, text: str, seconds: float, gates: dict[str, str], titles: dict[str, str]
) -> Held:
    return Held(
        id=secrets.token_hex(16),
        account=account,
        action=action,
        text=text,
        due=time.time() + seconds,
        gates=gates,
        titles={w: t[:200] for w, t in titles.items()},
    )


def _read(path: Path) -> Held | None:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_HELD_BYTES)
        return Held(**json.loads(raw))
    except (OSError, ValueError, TypeError):
        return None


def pending(data_dir: Path, account: str) -> list[Held]:
    """The account's answers still held (undoable), soonest due first."""
    root = held_dir(data_dir)
    if not root.is_dir():
        return []
    out = []
    for path in root.glob("*.json"):
        held = _read(path)
        if held is not None and held.account == account:
            out.append(held)
    return sorted(out, key=lambda h: h.due)


def held_gates(data_dir: Path, account: str) -> set[str]:
    return {w for h in pending(data_dir, account) for w in h.gates}


def undo(data_dir: Path, account: str, held_id: str) -> Held | None:
    """Take a held answer back: the answer, if it was still held (nothing was sent),
    else None (it is being sent or was sent)."""
    path = _path(data_dir, held_id)
    held = _read(path)
    if held is None or held.account != account:
        return None
    try:
        # Renamed away first: only one of undo and the sender's claim can win the file.
        gone = path.with_suffix(".undone")
        os.rename(path, gone)
    except FileNotFoundError:
        return None
    gone.unlink(missing_ok=True)
    return held


def claim_due(data_dir: Path, now: float | None = None) -> list[tuple[Path, Held]]:
    """The held answers whose window has closed, each claimed (renamed) by this process."""
    root = held_dir(data_dir)
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    for stale in root.glob("*.sending"):
        try:
            if now - stale.stat().st_mtime > CLAIM_STALE_SECONDS:
                os.rename(stale, stale.with_suffix(".json"))
        except OSError:
            continue
    out = []
    for path in root.glob("*.json"):
        held = _read(path)
        if held is None or held.due > now:
            continue
        claim = path.with_suffix(".sending")
        try:
            os.rename(path, claim)
        except FileNotFoundError:
            continue  # undone, or claimed by another inbox, meanwhile
        os.utime(claim)
        out.append((claim, held))
    return out


def settle(data_dir: Path, claim: Path, held: Held, said: str, ok: bool) -> None:
    """What became of a held answer, kept for the person's next page; the claim goes."""
    folder = _said_dir(data_dir, held.account)
    folder.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"said": said, "ok": ok, "at": time.time()}).encode()
    write_private(folder / f"{held.id}.json", line)
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in kept[:-SAID_KEPT]:
        old.unlink(missing_ok=True)
    claim.unlink(missing_ok=True)


def said_lines(data_dir: Path, account: str) -> list[dict]:
    """The lines about sent answers the person has not seen yet (read once)."""
    folder = _said_dir(data_dir, account)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            out.append(json.loads(path.read_bytes()[:4096]))
        except (OSError, ValueError):
            pass
        path.unlink(missing_ok=True)
    return [d for d in out if isinstance(d, dict) and isinstance(d.get("said"), str)]
