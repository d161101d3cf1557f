"""A team's shared answers: all that crosses between the principals of a team, and nothing
else. Membership is opt-in and set by an operator (`vicar team`); each person sees theirs
(`vicar health`).

What a member's gates leave here, and only this:
- per kind of action, how many answers were each outcome (vicar.proxy.team.KindCounts:
  the task type, the lineage and its parts; "+ask" where they asked to be asked first), the
  team prior's evidence;
- the autonomy rule's draws: a score, whether the proxy's proposal was right, and the
  weight of its label (numbers only), for the bound pooled over the team
  (vicar.proxy.autonomy.team).
Never words, artifacts, memory ids or gate ids: one person's memory never reaches another's
proxy. Each answer is written once (by its gate's workflow id, hashed); a member's own rows
are told apart only to leave them out of what their own proxy reads of the team.

Layout: <data dir>/teams/<team>/members (one principal per line) and answers.db (SQLite,
WAL) beside it. Every worker that serves a team's principals reads and writes the same
files: the team's principals are served from one data dir (one machine, or a shared
volume), docs/team-prior.md.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from vicar.errors import InvalidInput
from vicar.files import atomic_write
from vicar.memory.names import check_principal, child_path
from vicar.models import AnsweredBy, OutcomeRecord
from vicar.proxy.team import KindCounts, kinds_of, outcome_of

TEAMS = "teams"
MEMBERS = "members"
ANSWERS = "answers.db"
MAX_MEMBERS = 1000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS counts (
    member TEXT NOT NULL, kind TEXT NOT NULL, outcome TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (member, kind, outcome)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (gate TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS draws (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, member TEXT NOT NULL,
    score REAL NOT NULL, wrong INTEGER NOT NULL, weight REAL NOT NULL, labelled INTEGER NOT NULL
);
"""


def teams_dir(data_dir: Path) -> Path:
    return data_dir / TEAMS


def _team_dir(data_dir: Path, team: str) -> Path:
    base = teams_dir(data_dir)
    base.mkdir(parents=True, exist_ok=True)
    return child_path(base, team, "team")


def check_team(team: str) -> str:
    try:
        return check_principal(team)  # the same alphabet: one safe path component
    except InvalidInput:
        raise InvalidInput(f"invalid team {team[:70]!r}: 1-64 letters, digits, '.', '_', '@', '-'") from None


# -- membership ----------------------------------------------------------------------

_membership: dict[Path, tuple[tuple, dict[str, str]]] = {}
_membership_lock = threading.Lock()


def _read_members(path: Path) -> list[str]:
    try:
        names = path.read_text(encoding="utf-8").split()
    except FileNotFoundError:
        return []
    return [n for n in names if n][:MAX_MEMBERS]


def team_of(data_dir: Path, principal: str) -> str | None:
    """The principal's team, or None. Read again only when a members file changes."""
    base = teams_dir(data_dir)
    if not base.is_dir():
        return None
    files = sorted(base.glob(f"*/{MEMBERS}"))
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    with _membership_lock:
        cached = _membership.get(base)
        if cached is None or cached[0] != stamp:
            who: dict[str, str] = {}
            for f in files:
                for name in _read_members(f):
                    who.setdefault(name, f.parent.name)
            cached = _membership[base] = (stamp, who)
    return cached[1].get(principal)


def members(data_dir: Path, team: str) -> list[str]:
    return _read_members(_team_dir(data_dir, check_team(team)) / MEMBERS)


def set_team(data_dir: Path, principal: str, team: str | None) -> str | None:
    """Put the principal in `team` (None: in none), out of any other; the team it was in."""
    check_principal(principal)
    before = team_of(data_dir, principal)
    base = teams_dir(data_dir)
    for f in sorted(base.glob(f"*/{MEMBERS}")) if base.is_dir() else []:
        names = _read_members(f)
        if principal in names and f.parent.name != team:
            atomic_write(f, "".join(f"{n}\n" for n in names if n != principal))
    if team is not None:
        path = _team_dir(data_dir, check_team(team)) / MEMBERS
        path.parent.mkdir(parents=True, exist_ok=True)
        names = _read_members(path)
        if principal not in names:
            if len(names) >= MAX_MEMBERS:
                raise InvalidInput(f"team {team} has {MAX_MEMBERS} members already")
            atomic_write(path, "".join(f"{n}\n" for n in [*names, principal]))
    return before


# -- the answers -----------------------------------------------------------------------


class TeamDraw(NamedTuple):
    seq: int
    score: float
    wrong: bool
    weight: float
    labelled: bool


_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


@contextmanager
def _answers(data_dir: Path, team: str) -> Iterator[sqlite3.Connection]:
    path = _team_dir(data_dir, check_team(team)) / ANSWERS
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locks_guard:
        lock = _locks.setdefault(path, threading.Lock())
    with lock:
        db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
            yield db
        finally:
            db.close()


def _gate_key(record: OutcomeRecord) -> str:
    """The gate, as the team store may know it: a hash, never its id."""
    return hashlib.blake2b(f"{record.request.principal}\0{record.workflow_id}".encode(), digest_size=16).hexdigest()


def share(
    data_dir: Path,
    team: str,
    record: OutcomeRecord,
    draw: tuple[float, bool, float, bool] | None,
) -> bool:
    """What one gate of a member leaves with their team: the human's answer's counts per
    kind of action, and the autonomy rule's draw (score, wrong, weight, labelled) if the
    gate was one. Once per gate; False if it was already shared."""
    member = record.request.principal
    with _answers(data_dir, team) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("INSERT OR IGNORE INTO seen (gate) VALUES (?)", (_gate_key(record),)).rowcount == 0:
                db.execute("ROLLBACK")
                return False
            if record.answered_by is AnsweredBy.human:
                outcome = outcome_of(record.action.value, record.ask_first)
                for dim, value in kinds_of(record.request).items():
                    db.execute(
                        "INSERT INTO counts (member, kind, outcome, n) VALUES (?, ?, ?, 1)"
                        " ON CONFLICT (member, kind, outcome) DO UPDATE SET n = n + 1",
                        (member, f"{dim}={value}", outcome),
                    )
            if draw is not None:
                score, wrong, weight, labelled = draw
                db.execute(
                    "INSERT INTO draws (member, score, wrong, weight, labelled) VALUES (?, ?, ?, ?, ?)",
                    (member, score, int(wrong), weight, int(labelled)),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return True


def team_counts(data_dir: Path, team: str, excluding: str) -> KindCounts:
    """The team's answers per kind of action, the member `excluding`'s own left out (their
    proxy counts those from their own memory)."""
    out = KindCounts()
    with _answers(data_dir, team) as db:
        for kind, outcome, n in db.execute(
            "SELECT kind, outcome, SUM(n) FROM counts WHERE member != ? GROUP BY kind, outcome", (excluding,)
        ):
            out.counts.setdefault(kind, {})[outcome] = int(n)
    return out


def team_draws(data_dir: Path, team: str, after_seq: int = 0) -> list[TeamDraw]:
    """Every member's draws after `after_seq`, in the order they came."""
    with _answers(data_dir, team) as db:
        rows = db.execute(
            "SELECT seq, score, wrong, weight, labelled FROM draws WHERE seq > ? ORDER BY seq", (after_seq,)
        ).fetchall()
    return [TeamDraw(seq, score, bool(w), weight, bool(lab)) for seq, score, w, weight, lab in rows]


def share_outcome(data_dir: Path, record: OutcomeRecord) -> bool:
    """A member's gate outcome, shared with their team (nothing where they are in none):
    its answer's counts and its draw for the team's autonomy rule. Idempotent."""
    from vicar.proxy.outcomes import autonomy_pair, unaudited_alone

    team = team_of(data_dir, record.request.principal)
    if team is None:
        return False
    draw = None
    if record.request.kind.value == "gate":
        pair, alone = autonomy_pair(record), unaudited_alone(record)
        if pair is not None:
            draw = (pair.score, not pair.correct, 1.0 / pair.audit_p if pair.audit_p else 1.0, True)
        elif alone is not None:
            draw = (alone.score, False, 1.0 / alone.audit_p, False)
    return share(data_dir, team, record, draw)


_counts: dict[tuple[str, str, str], tuple[int, KindCounts]] = {}
_counts_lock = threading.Lock()


def counts_for(data_dir: Path, principal: str) -> KindCounts | None:
    """What the principal's proxy reads of their team at a consult: the other members'
    answers per kind of action (None: in no team). Read again only after a new answer."""
    team = team_of(data_dir, principal)
    if team is None:
        return None
    with _answers(data_dir, team) as db:
        stamp = db.execute("SELECT COUNT(*) FROM seen").fetchone()[0]
    key = (str(data_dir), team, principal)
    with _counts_lock:
        cached = _counts.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    counts = team_counts(data_dir, team, principal)
    with _counts_lock:
        _counts[key] = (stamp, counts)
    return counts
