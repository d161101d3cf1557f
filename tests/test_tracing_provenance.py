"""Traces name who decided (docs/tracing.md): one `vicar.decision` span for every gate's
decision, a rule's and the person's too, the person by name (`vicar.responder`), and one
gate id on every span, the gate's own (a hook's gate id holds a slash:
`claude-code/<hash>`). A real gate on the dev server, spans caught in memory."""

from __future__ import annotations

import uuid

from vicar.client import add_rule
from vicar.client.gates import answer_gate, start_gate
from vicar.models import AnsweredBy, HumanAnswer

from .conftest import wait_escalated
from .test_tracing import gate_request, spans_of, traced  # noqa: F401  (the fixture)


def gate_ids(spans) -> set[str]:
    return {str(s.attributes["vicar.gate_id"]) for ss in spans.values() for s in ss if "vicar.gate_id" in s.attributes}


async def test_the_persons_decision_has_its_span_naming_them_and_one_gate_id(traced):  # noqa: F811
    client, task_queue, exporter = traced
    req = gate_request(f"p-{uuid.uuid4().hex[:8]}", artifact="Add an index.")
    req = req.model_copy(update={"gate_id": f"claude-code/{uuid.uuid4().hex}"})
    handle = await start_gate(client, req, task_queue)
    await wait_escalated(client, req.gate_id)
    await answer_gate(client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder=req.principal))
    assert (await handle.result()).answered_by is AnsweredBy.human
    spans = spans_of(exporter, req.gate_id)
    [decision] = spans["vicar.decision"]
    attrs = decision.attributes
    assert (attrs["vicar.decided_by"], attrs["vicar.responder"], attrs["vicar.action"]) == (
        "human",
        req.principal,
        "approve",
    )
    assert spans["vicar.answer"][0].attributes["vicar.responder"] == req.principal
    assert gate_ids(spans) == {req.gate_id}, gate_ids(spans)


async def test_a_rules_decision_has_its_span(traced):  # noqa: F811
    client, task_queue, exporter = traced
    p = f"p-{uuid.uuid4().hex[:8]}"
    await add_rule(
        client, p, dict(name="docs-ok", effect="approve", task_types=["docs"]), by="dana", task_queue=task_queue
    )
    req = gate_request(p, task_type="docs", artifact="Fix a typo.")
    handle = await start_gate(client, req, task_queue)
    assert (await handle.result()).answered_by is AnsweredBy.rule
    spans = spans_of(exporter, req.gate_id)
    [decision] = spans["vicar.decision"]
    attrs = decision.attributes
    assert (attrs["vicar.decided_by"], attrs["vicar.rule"], attrs["vicar.decision"]) == ("rule", "docs-ok", "rule")
    assert "vicar.responder" not in attrs and attrs["vicar.rule_author"] == "dana"
    assert gate_ids(spans) == {req.gate_id}
