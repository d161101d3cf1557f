"""The rule in force: what a gate of a principal is allowed to do alone now.

The parameters (the defaults, then the principal's `autonomy.json`, then its entry for
the gate's state), the bets over the principal's evidence of the gate's kind, and the
drift test of the gate's context, read together. `vicar health`, the demo's footer and
every consult call `rule_in_force`; a consult calls it once, through `gate_rule`,
which also says whether this gate is the one to announce a withdrawal.

The first gate of a context whose consult sees a withdrawal announces it (the webhook
event `autonomy_withdrawn`): the store's meta table keeps, per withdrawal, the workflow
id of that gate, so a retried consult of the same gate announces it again (its notice
has one event id, so the receiver sees one) and any other gate does not.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vicar.errors import InvalidInput
from vicar.memory.store import RecordStore
from vicar.models import AutonomyRule
from vicar.proxy.autonomy.drift import DriftBook
from vicar.proxy.autonomy.ledger import PairLedger
from vicar.settings import AutonomyParams

AUTONOMY_FILE = "autonomy.json"  # per principal, beside its memory
AUTONOMY_FILE_BYTES = 64_000


class AutonomyFile(BaseModel):
    """`autonomy.json`: overrides for one principal, then per state (by state name)."""

    model_config = ConfigDict(extra="forbid")

    target_error: float | None = Field(None, gt=0.0, le=1.0)
    delta: float | None = Field(None, gt=0.0, lt=1.0)
    audit_share: float | None = Field(None, ge=0.0, le=1.0)
    states: dict[str, "AutonomyFile"] = Field(default_factory=dict, max_length=64)

    def overrides(self) -> dict:
        return self.model_dump(exclude={"states"}, exclude_none=True)


_files: dict[Path, tuple[tuple[int, int], AutonomyFile]] = {}


def autonomy_params(base: AutonomyParams, principal_dir: Path, state: str) -> AutonomyParams:
    """The rule's parameters for a gate: the defaults, then the principal's file, then
    its entry for the state. The file is read again only when it changes."""
    path = principal_dir / AUTONOMY_FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        return base
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _files.get(path)
    if cached is None or cached[0] != stamp:
        if st.st_size > AUTONOMY_FILE_BYTES:
            raise InvalidInput(f"{path} has {st.st_size} bytes, more than {AUTONOMY_FILE_BYTES}")
        try:
            parsed = AutonomyFile.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "file"
            raise InvalidInput(f"{path} is not a valid autonomy file: {where}: {first['msg']}") from None
        cached = _files[path] = (stamp, parsed)
    config = cached[1]
    state_config = config.states.get(state)
    return base.model_copy(update={**config.overrides(), **(state_config.overrides() if state_config else {})})


def audit_draw(principal: str, gate_key: str) -> float:
    """A uniform draw in [0, 1) fixed by the gate, so a retried or replayed gate is
    audited (or not) the same way."""
    digest = hashlib.blake2b(f"audit\0{principal}\0{gate_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# Per open store: its pair ledgers by (kind, target, delta, weighting) and drift books.
# One process holds a memory (the owner lock), so new evidence only comes through this
# store: a ledger reads just the rows added since it last looked.
_books: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_books_lock = threading.Lock()


def rule_in_force(
    store: RecordStore,
    principal_dir: Path,
    base: AutonomyParams,
    state: str,
    kind: str = "gate",
    task_type: str | None = None,
) -> AutonomyRule:
    """The autonomy rule a gate of this kind, state (and task type) is under now: the
    principal's evidence of the kind under the parameters for the state, and no
    threshold in a context the drift test has withdrawn."""
    p = autonomy_params(base, principal_dir, state)
    with _books_lock:
        books = _books.setdefault(store, {})
        ledger = books.setdefault(
            (kind, p.target_error, p.delta, p.weighting), PairLedger(p.target_error, p.delta, p.weighting == "ipw")
        )
        ledger.update(store, kind)
        rule = ledger.rule(p.audit_share)
        if task_type is None:
            return rule
        drift = books.setdefault((kind, "drift", p.target_error, p.delta), DriftBook(p.target_error, p.delta))
        drift.update(store, kind)
        w = drift.withdrawn.get((state, task_type))
    if w is None:
        return rule
    return rule.model_copy(
        update={"threshold": None, "withdrawn": w.reason(p.target_error, p.delta), "withdrawn_seq": w.seq}
    )


class GateRule(NamedTuple):
    rule: AutonomyRule
    draw: float  # the gate's audit draw
    news: str  # the withdrawal this gate announces ("" : none)


def gate_rule(
    store: RecordStore,
    principal_dir: Path,
    base: AutonomyParams,
    principal: str,
    kind: str,
    state: str,
    task_type: str,
    gate_key: str,
) -> GateRule:
    """Everything the autonomy rule says of one gate, computed once per consult."""
    draw = audit_draw(principal, gate_key)
    rule = rule_in_force(store, principal_dir, base, state, kind, task_type)
    return GateRule(rule=rule, draw=draw, news=announcement(store, kind, state, task_type, rule, gate_key))


ANNOUNCED = "autonomy_withdrawn/"  # the meta table's key prefix


def announcement(store: RecordStore, kind: str, state: str, task_type: str, rule: AutonomyRule, gate_key: str) -> str:
    """The withdrawal's reason if `rule` is withdrawn and the gate `gate_key` is the one to
    announce it, else ""."""
    if not rule.withdrawn or not gate_key:
        return ""
    key = f"{ANNOUNCED}{kind}/{state}/{task_type}/{rule.withdrawn_seq}"
    with store.transaction(chunk_rows_kept=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, gate_key))
        first = row is None or row[0] == gate_key
    return rule.withdrawn if first else ""
