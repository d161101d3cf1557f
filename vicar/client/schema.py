"""The gate's contract for clients in any language: the workflow, its id scheme and task
queue, each update, signal and query with its payload, and JSON Schema for every
payload (`vicar schema`), the webhook's notice included. The names come from the code
that serves them and the schemas from the models the worker validates with (their
patterns from the validators' own regexes: vicar/models/schema_rules.py), so the document
cannot drift from it."""

from __future__ import annotations

from pydantic import BaseModel

from vicar import contracts as c
from vicar.errors import INVALID_GATE_REQUEST
from vicar.models import GateDetails, GateRequest, GateResult, HumanAnswer
from vicar.models.audit import AuditRecord
from vicar.models.control import Control, ControlChange
from vicar.models.view import ArtifactFile, GateView
from vicar.settings import TASK_QUEUE
from vicar.workflows import search_attributes as sa

# What a client sends and receives, by the name the schema files carry.
PAYLOADS: dict[str, type[BaseModel]] = {
    "GateRequest": GateRequest,
    "GateResult": GateResult,
    "HumanAnswer": HumanAnswer,
    "GateDetails": GateDetails,
    "Notice": c.Notice,
    "AuditRecord": AuditRecord,  # one line of `vicar audit export` (docs/audit.md)
    "ControlChange": ControlChange,  # a change to a principal's rules or pauses (docs/rules.md)
    "Control": Control,
    "ArtifactFile": ArtifactFile,
    "GateView": GateView,  # `vicar gate show -o json` (docs/gate-show.md)
}


def interface() -> dict:
    """The gate workflow's surface, as the worker registers it."""
    return {
        "workflow_type": c.GATE_WORKFLOW,
        "workflow_id": c.gate_workflow_id("<gate_id>") + "  (any id works; answer by the id it was started under)",
        "task_queue": f"{TASK_QUEUE}  (VICAR_TASK_QUEUE)",
        "id_reuse_policy": c.GATE_ID_REUSE_NOTE,
        "input": "GateRequest",
        "result": "GateResult",
        "invalid_input": "the workflow fails at once, non-retryable, with ApplicationError type "
        f"{INVALID_GATE_REQUEST}",
        "updates": {
            c.RESPOND_UPDATE: {"input": "HumanAnswer", "result": "string (accepted), or a rejection naming why"}
        },
        "signals": {
            c.HUMAN_RESPONSE_SIGNAL: {
                "input": "HumanAnswer",
                "note": "a bad answer is logged and ignored; use the respond update to get an error",
            }
        },
        "queries": {
            c.DETAILS_QUERY: {"result": "GateDetails | null"},
            c.ARTIFACT_QUERY: {"result": "ArtifactFile[] (the worker's excerpts of the files, once escalated)"},
        },
        "webhook": {
            "body": "Notice",
            "method": "POST (VICAR_WEBHOOK_URL), Content-Type application/json",
            "headers": {"Idempotency-Key": "the notice's event_id: a retried notice carries the same"},
        },
        "audit_trail": "`vicar audit export` writes AuditRecord, one per gate (docs/audit.md); "
        "a webhook Notice with event overruled carries the Review that overruled the proxy's answer",
        "rules_and_pauses": {
            "workflow": f"{c.BRAIN_WORKFLOW} {c.brain_workflow_id('<principal>')} (update-with-start; docs/rules.md)",
            "update": {c.CONTROL_UPDATE: {"input": "ControlChange", "result": "Control"}},
            "query": {c.CONTROL_QUERY: {"result": "Control"}},
        },
        "search_attributes": [key.name for key in sa.ALL],
    }


def document() -> dict:
    """The interface and every payload's JSON Schema, one JSON document."""
    return {"interface": interface(), "schemas": {name: model.model_json_schema() for name, model in PAYLOADS.items()}}
