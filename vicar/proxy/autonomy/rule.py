"""The rule in force: what a gate of a principal is allowed to do alone now.

The parameters (the defaults, then the principal's `autonomy.json`, then its entry for
the gate's state), the bets over the principal's evidence of the gate's kind, and the
drift test of the gate's context, read together. `vicar health`, the demo's footer and
every consult call `rule_in_force`; a consult calls it once, through `gate_rule`,
which also says whether this gate is the one to announce a withdrawal, and applies the
person's target rules that match the gate (vicar.proxy.autonomy.targets: both bounds
must hold).

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
from vicar.models import AutonomyRule, GateRequest
from vicar.models.control import Rule
from vicar.proxy.autonomy.drift import DriftBook
from vicar.proxy.autonomy.ledger import PairLedger
from vicar.proxy.autonomy.targets import TargetLedger, matches_request, rule_key, target_rules, with_targets
from vicar.proxy.autonomy.team import team_rule
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


def _kept(books: dict, key: tuple, make, *args):
    """The book kept under `key`, made (`make(*args)`) only when there is none: a ledger
    is built once per store and kept, never built again per gate to be thrown away."""
    book = books.get(key)
    if book is None:
        book = books[key] = make(*args)
    return book


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
        ledger = _kept(
            books,
            (kind, p.target_error, p.delta, p.weighting),
            PairLedger,
            p.target_error,
            p.delta,
            p.weighting == "ipw",
        )
        ledger.update(store, kind)
        rule = ledger.rule(p.audit_share)
    if rule.threshold is None and not rule.withdrawn:
        # Nothing proven on the person's own answers yet: their team's, where they are in one.
        pooled = team_rule(store, principal_dir, kind, p.target_error, p.delta, p.audit_share, p.weighting == "ipw")
        if pooled is not None and pooled.threshold is not None:
            rule = pooled
    with _books_lock:
        books = _books.setdefault(store, {})
        if task_type is None:
            return rule
        drift = _kept(books, (kind, "drift", p.target_error, p.delta), DriftBook, p.target_error, p.delta)
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
    request: GateRequest | None = None,
) -> GateRule:
    """Everything the autonomy rule says of one gate, computed once per consult: the
    pooled rule, the drift test, and the person's target rules that match `request`
    (both bounds must hold)."""
    draw = audit_draw(principal, gate_key)
    rule = rule_in_force(store, principal_dir, base, state, kind, task_type)
    news = announcement(store, kind, state, task_type, rule, gate_key)
    if request is not None and rule.threshold is not None:
        rule = under_targets(store, principal_dir, base, state, kind, rule, request)
    return GateRule(rule=rule, draw=draw, news=news)


def target_rule_states(
    store: RecordStore, principal_dir: Path, base: AutonomyParams, state: str = "", kind: str = "gate"
) -> list[tuple[Rule, AutonomyRule]]:
    """Each of the person's target rules (kept in the store by the brain) with the rule its
    own bound proves now, over the gates it matches (`vicar health`)."""
    from vicar.proxy.control_store import kept_control

    p = autonomy_params(base, principal_dir, state)
    return [(r, _target_ledger(store, p, kind, r).rule(p.audit_share)) for r in target_rules(kept_control(store))]


def _target_ledger(store: RecordStore, p: AutonomyParams, kind: str, rule: Rule) -> TargetLedger:
    with _books_lock:
        books = _books.setdefault(store, {})
        ledger = _kept(
            books,
            ("target", kind, rule_key(rule), p.delta, p.weighting),
            TargetLedger,
            rule,
            p.delta,
            p.weighting == "ipw",
        )
        ledger.update(store, kind)
        return ledger


def under_targets(
    store: RecordStore,
    principal_dir: Path,
    base: AutonomyParams,
    state: str,
    kind: str,
    pooled: AutonomyRule,
    request: GateRequest,
) -> AutonomyRule:
    """The pooled rule as the person's target rules matching the gate leave it."""
    from vicar.proxy.control_store import kept_control

    try:
        control = kept_control(store)
    except ValueError as exc:  # fail closed: a target the person set must not be skipped
        return pooled.model_copy(update={"threshold": None, "withdrawn": f"target rules unknown: {exc}"})
    mine = [r for r in target_rules(control) if matches_request(r, request)]
    if not mine:
        return pooled
    p = autonomy_params(base, principal_dir, state)
    return with_targets(pooled, [(r, _target_ledger(store, p, kind, r).rule(p.audit_share)) for r in mine])


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
