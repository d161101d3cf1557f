"""The waiting gates for the list page, read from visibility as
`vicar.client.gates.list_escalations` reads them (the same query, the memo each gate writes
when it escalates), but decoding only what the page shows: the SDK's listing decodes
every search attribute of every workflow, which took most of the list's time at 1,000
gates (bench/INBOX_RESULTS.md). The memos are unsealed in one codec call."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client

from vicar import contracts as c
from vicar.client.gates import UNREADABLE, UNREADABLE_CHARS
from vicar.memory.text import clip
from vicar.models import GateDetails, GateStatus
from vicar.runtime.codec import REFUSED, refusal_line
from vicar.workflows import search_attributes as sa

QUERY = f'VicarStatus = "{GateStatus.escalated.value}" AND ExecutionStatus = "Running"'
PAGE = 1000


async def waiting_gates(client: Client) -> list[GateDetails]:
    """Every escalated, running gate (any principal), unsorted. A gate whose memo does
    not open here (sealed with a key this process lacks, e.g. one dropped in a rotation)
    is listed from its search attributes, saying so: one such gate must not take the
    page down for everyone (issue 34)."""
    memos: list[Payload] = []
    ids: list[tuple[str, dict[str, Payload]]] = []
    bare: list[tuple[str, dict[str, Payload]]] = []  # escalated before gates wrote the memo
    token = b""
    while True:
        page = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace, query=QUERY, page_size=PAGE, next_page_token=token
            )
        )
        for ex in page.executions:
            memo = ex.memo.fields.get(c.ESCALATION_MEMO)
            attrs = dict(ex.search_attributes.indexed_fields)
            if memo is not None:
                memos.append(memo)
                ids.append((ex.execution.workflow_id, attrs))
            else:
                bare.append((ex.execution.workflow_id, attrs))
        token = page.next_page_token
        if not token:
            break
    codec = client.data_converter.payload_codec
    if codec and memos:
        memos = list(await codec.decode(memos))
    out = []
    for (wid, attrs), p in zip(ids, memos):
        if p.metadata.get("encoding") == REFUSED:
            out.append(_from_attributes(wid, attrs, f"{UNREADABLE}{refusal_line(p)})"))
            continue
        try:
            out.append(GateDetails.model_validate_json(p.data).model_copy(update={"workflow_id": wid}))
        except ValueError:  # not what a gate writes (a workflow someone else started)
            out.append(_from_attributes(wid, attrs, f"{UNREADABLE}not a gate's summary)"))
    for wid, attrs in bare:
        out.append(_from_attributes(wid, attrs))
    return out


def _keyword(attrs: dict[str, Payload], name: str) -> str | None:
    p = attrs.get(name)
    try:
        value = json.loads(p.data) if p is not None else None
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _from_attributes(
    workflow_id: str, attrs: dict[str, Payload], question: str = "(no summary: escalated by an older Vicar)"
) -> GateDetails:
    state = _keyword(attrs, sa.STATE.name)
    return GateDetails(
        gate_id=workflow_id.removeprefix(c.gate_workflow_id("")),
        workflow_id=workflow_id,
        status=GateStatus.escalated,
        principal=_keyword(attrs, sa.PRINCIPAL.name) or "?",
        state=state if state in ("INTENT_ASSERT", "PLAN_ASSERT", "WORK_ASSERT") else "PLAN_ASSERT",
        task_type=_keyword(attrs, sa.TASK_TYPE.name) or "?",
        question=clip(question, UNREADABLE_CHARS),
    )
