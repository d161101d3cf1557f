"""Answers held for a short undo. A gate cannot take an answer back once it has it (its
workflow completes on the answer), so the inbox keeps an answer for `undo_seconds`
before it sends it: Undo inside that window deletes it and nothing was ever sent; when
the window closes the inbox sends it, as `vicar answer` would.

A held answer is a file under `<data_dir>/inbox/held/`, `<id>-<account>.json`, written
whole (temp file, fsync, rename, directory fsync) before the page says "held", so a
server that stops keeps it and sends it when it starts again (late, never lost). Sending
claims the file by renaming it (`.sending`), so two inboxes serving one data directory
never both send it; a claim a send stopped renewing (its process died) is taken back
after CLAIM_STALE_SECONDS (a second answer to a gate that has one is refused by the
gate, and the sender recognises its own answer there).

A send that could not reach its gate for a reason that may pass (Temporal unreachable, a
worker that does not run the gate now) is kept and tried again, later each time
(`retry_in`), until the gate takes it or refuses it for good (answered by someone else,
ended, not allowed); it can no longer be undone then, since a gate may hold it already.
A file that cannot be read back (damaged outside Vicar: every write here is whole or
absent) is moved to `held/unreadable/`, logged, and its account is told (the file's
name says whose it is). What became of each answer is a line the person sees on their
next page."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import stat
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vicar.inbox.names import checked_user_name, inbox_dir

log = logging.getLogger("uvicorn.error")  # the inbox's log, as answering.py's
HELD_ID_RE = re.compile(r"[0-9a-f]{32}")
# A send renews its claim while it runs (answering.py); a claim not renewed this long was
# left by a dead process.
CLAIM_STALE_SECONDS = 120.0
RETRY_FIRST, RETRY_MAX = 2.0, 30.0  # seconds before the next try of a send that may work later
# A file read back broken is reported once it has stayed so this long: a writer that is
# not ours (a person's editor, a copy) may be caught half-way.
BROKEN_AFTER_SECONDS = 2.0
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
    # Past its undo window (tries > 0) `gates` holds what is still to send; what earlier
    # tries settled is kept for the last line.
    tries: int = 0
    total: int = 0  # how many gates it answered at first (0: len(gates))
    sent: int = 0
    failed: list[str] = field(default_factory=list)  # "<gate>: why", refused for good
    waiting: str = ""  # why the last try did not reach its gates
    ask_first: bool = False  # "… and ask me first": this kind of action stays the person's

    def left(self) -> int:
        """Whole seconds until it is sent (0: being sent)."""
        return max(0, round(self.due - time.time()))

    def label(self) -> str:
        total = self.total or len(self.gates)
        if total == 1 and len(self.gates) == 1:
            wid = next(iter(self.gates))
            return f"{self.action} {self.titles.get(wid) or wid}{self._asked()}"
        return f"{self.action} {total} gates{self._asked()}"

    def _asked(self) -> str:
        return " (and ask me first)" if self.ask_first else ""

    def undoable(self) -> bool:
        """Still in its window: nothing of it was sent yet."""
        return self.tries == 0


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


def _name(held_id: str, account: str) -> str:
    if not HELD_ID_RE.fullmatch(held_id):
        raise ValueError(f"not a held answer's id: {held_id[:40]!r}")
    return f"{held_id}-{checked_user_name(account)}"


def _path(data_dir: Path, name: str, suffix: str = ".json") -> Path:
    root = held_dir(data_dir).resolve()
    path = (root / f"{name}{suffix}").resolve()
    if path.parent != root:
        raise ValueError("a held answer's path left its directory")
    return path


def owner(path: Path) -> str | None:
    """The account a held file's name says it is of (None: the older name, `<id>.json`)."""
    stem = path.name.rsplit(".", 1)[0]
    if len(stem) > 33 and stem[32] == "-" and HELD_ID_RE.fullmatch(stem[:32]):
        return stem[33:]
    return None


def hold(data_dir: Path, held: Held) -> Held:
    """Keep `held` on disk (durably) until it is due."""
    held_dir(data_dir).mkdir(parents=True, exist_ok=True)
    write_private(_path(data_dir, _name(held.id, held.account)), json.dumps(asdict(held)).encode())
    return held


def new_held(
    account: str,
    action: str,
    text: str,
    seconds: float,
    gates: dict[str, str],
    titles: dict[str, str],
    ask_first: bool = False,
) -> Held:
    return Held(
        id=secrets.token_hex(16),
        account=account,
        action=action,
        text=text,
        due=time.time() + seconds,
        gates=gates,
        titles={w: t[:200] for w, t in titles.items()},
        ask_first=ask_first,
    )


def _read_file(path: Path, limit: int) -> bytes:
    """A regular file's first bytes, up to `limit` + 1. Opened without blocking and without
    following a link: a FIFO or a link put in the folder must not hold up the sender."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def _read(path: Path) -> Held:
    """The held answer in `path`; OSError, or ValueError saying why it is not one."""
    raw = _read_file(path, MAX_HELD_BYTES)
    if len(raw) > MAX_HELD_BYTES:
        raise ValueError(f"larger than {MAX_HELD_BYTES} bytes")
    try:
        held = Held(**json.loads(raw))
    except TypeError as exc:  # not an object, or fields that are not a held answer's
        raise ValueError(str(exc)) from None
    if not (isinstance(held.gates, dict) and isinstance(held.due, int | float) and isinstance(held.account, str)):
        raise ValueError("not a held answer")
    return held


def _readable(path: Path) -> Held | None:
    try:
        return _read(path)
    except (OSError, ValueError):
        return None


def _of(data_dir: Path, account: str, suffixes: tuple[str, ...]) -> list[Held]:
    root = held_dir(data_dir)
    if not root.is_dir():
        return []
    out = []
    for suffix in suffixes:
        for path in root.glob(f"*{suffix}"):
            if owner(path) not in (account, None):
                continue  # another account's, by its name: not read
            held = _readable(path)
            if held is not None and held.account == account:
                out.append(held)
    return sorted(out, key=lambda h: h.due)


def pending(data_dir: Path, account: str) -> list[Held]:
    """The account's answers still in their undo window, soonest due first."""
    return [h for h in _of(data_dir, account, (".json",)) if h.undoable()]


def held_gates(data_dir: Path, account: str) -> set[str]:
    """The gates the account's held answers are for: in their window, being sent, or kept
    to be tried again (such a gate is not offered for another answer meanwhile)."""
    return {w for h in _of(data_dir, account, (".json", ".sending")) for w in h.gates}


def undo(data_dir: Path, account: str, held_id: str) -> Held | None:
    """Take a held answer back: the answer, if it was still in its window (nothing was
    sent), else None (it is being sent, was sent, or was tried already)."""
    for name in (_name(held_id, account), held_id):  # the older name had no account in it
        path = _path(data_dir, name)
        held = _readable(path)
        if held is None or held.account != account:
            continue
        if not held.undoable():
            return None
        try:
            # Renamed away first: only one of undo and the sender's claim can win the file.
            gone = path.with_suffix(".undone")
            os.rename(path, gone)
        except FileNotFoundError:
            return None
        gone.unlink(missing_ok=True)
        return held
    return None


def claim_due(data_dir: Path, now: float | None = None) -> list[tuple[Path, Held]]:
    """The held answers whose time has come, each claimed (renamed) by this process. A
    file that cannot be read is set aside and said (`_unreadable`), never skipped silently."""
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
        try:
            held = _read(path)
        except FileNotFoundError:
            continue  # undone, or claimed by another inbox, meanwhile
        except (OSError, ValueError) as exc:
            _unreadable(data_dir, path, exc, now)
            continue
        if held.due > now:
            continue
        claim = path.with_suffix(".sending")
        try:
            os.rename(path, claim)
        except FileNotFoundError:
            continue  # undone, or claimed by another inbox, meanwhile
        os.utime(claim)
        out.append((claim, held))
    return out


def _unreadable(data_dir: Path, path: Path, exc: Exception, now: float) -> None:
    """A held file that cannot be read back: moved aside (kept for whoever looks into
    it), logged, and said to its account. Nothing can be sent from it."""
    aside = held_dir(data_dir) / "unreadable"
    try:
        if now - os.lstat(path).st_mtime < BROKEN_AFTER_SECONDS:
            return  # maybe being written by hand: looked at again on a later round
        aside.mkdir(exist_ok=True)
        os.rename(path, aside / path.name)
    except OSError:
        return  # gone meanwhile (undone, claimed), or looked at again on a later round
    why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    account = owner(path)
    log.error(
        "inbox: a held answer of %s could not be read back (%s): nothing was sent from it; its file is kept as %s",
        account or "an unknown account",
        why,
        aside / path.name,
    )
    if account is None:
        return
    try:
        tell(
            data_dir,
            account,
            path.name[:32],
            f"not sent: one of your answers could not be read back from the inbox's disk ({why}); "
            "nothing was sent from it, so its gate waits for your answer again",
            ok=False,
        )
    except (OSError, ValueError) as exc2:
        log.error("inbox: could not tell %s that one of their answers was lost: %s", account, exc2)


def retry_in(tries: int) -> float:
    """Seconds until the next try after `tries` tries: 2, 4, 8, 16, then every 30."""
    return min(RETRY_MAX, RETRY_FIRST * 2 ** max(0, tries - 1))


def again(claim: Path, held: Held, now: float | None = None) -> Held:
    """Keep a claimed answer to be tried again later (`held` says what is left to send):
    its new content replaces the claim whole, then the claim becomes a held file again.
    A crash in between leaves a claim that goes stale and is tried again, never lost."""
    held.due = (time.time() if now is None else now) + retry_in(held.tries)
    write_private(claim, json.dumps(asdict(held)).encode())
    os.rename(claim, claim.with_suffix(".json"))
    return held


def renew(claim: Path) -> None:
    """A send still under way: its claim is not stale."""
    try:
        os.utime(claim)
    except OSError:
        pass


def tell(data_dir: Path, account: str, key: str, said: str, ok: bool) -> None:
    """A line for the account's next page (one per `key`, the latest kept)."""
    folder = _said_dir(data_dir, account)
    folder.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"said": said, "ok": ok, "at": time.time()}).encode()
    write_private(folder / f"{checked_user_name(key)}.json", line)
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in kept[:-SAID_KEPT]:
        old.unlink(missing_ok=True)


def settle(data_dir: Path, claim: Path, held: Held, said: str, ok: bool) -> None:
    """What became of a held answer, kept for the person's next page; the claim goes."""
    tell(data_dir, held.account, held.id, said, ok)
    claim.unlink(missing_ok=True)


def said_lines(data_dir: Path, account: str) -> list[dict]:
    """The lines about held answers the person has not seen yet (read once)."""
    folder = _said_dir(data_dir, account)
    if not folder.is_dir():
        return []
    out: list[object] = []
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            out.append(json.loads(_read_file(path, 4096)[:4096]))
        except (OSError, ValueError) as exc:
            log.error("inbox: a line for %s about one of their answers could not be read: %s", account, exc)
            out.append({"said": "a line about one of your answers could not be read", "ok": False})
        path.unlink(missing_ok=True)
    return [d for d in out if isinstance(d, dict) and isinstance(d.get("said"), str)]
