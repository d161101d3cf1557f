"""Which gate tells the orchestrator that autonomy was withdrawn from its context.

The drift test finds a withdrawal when the rule is next read (vicar.proxy.consult
`rule_in_force`); the first gate of the context whose consult sees it announces it
(the webhook event `autonomy_withdrawn`). The store's meta table keeps, per withdrawal,
the workflow id of that gate: a retried consult of the same gate announces it again
(its notice has one event id, so the receiver sees one), any other gate does not."""

from __future__ import annotations

from vicar.config import CalibrationParams
from vicar.memory.store import RecordStore
from vicar.models import AutonomyRule, GateRequest
from vicar.proxy.consult import autonomy_rule

META_PREFIX = "autonomy_withdrawn/"


def withdrawal_key(kind: str, state: str, task_type: str, rule: AutonomyRule) -> str:
    return f"{META_PREFIX}{kind}/{state}/{task_type}/{rule.withdrawn_seq}"


def announce(store: RecordStore, key: str, workflow_id: str) -> bool:
    """True if the gate `workflow_id` is the one to announce the withdrawal `key`."""
    with store.transaction(chunk_rows_kept=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return row[0] == workflow_id
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, workflow_id))
        return True


def withdrawal_news(memory, request: GateRequest, params: CalibrationParams, workflow_id: str | None) -> str:
    """The reason, if the gate's context is withdrawn and this gate is the one to say so."""
    rule = autonomy_rule(memory, request, params)
    if not rule.withdrawn or not workflow_id:
        return ""
    key = withdrawal_key(request.kind.value, request.state.value, request.task_type, rule)
    return rule.withdrawn if announce(memory.store, key, workflow_id) else ""
