"""The pre-review prefers the person's words on the same kind of work and marks what it
takes from another (issue 37 item 6): a docs gate's evidence is not "Fine for a patch
bump" passed off as said on docs. Pure (hand-made retrieval contexts), and `gate show`'s
and the demo's renderers."""

from __future__ import annotations

from vicar.models import AnsweredBy, ChunkSummary, GateRequest, LineageVerdict, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy.prereview import pre_review, rank

ARTIFACT = "docs/install.md: say that the installer needs Python 3.11 and run the docs build."


def request(task_type: str = "docs") -> GateRequest:
    return GateRequest(
        principal="ada",
        gate_id="g-new",
        state="WORK_ASSERT",
        task_type=task_type,
        question="Merge this change?",
        artifact_text=ARTIFACT,
    )


def chunk(i: int, response: str, task_type: str, similarity: float = 0.6) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=f"c{i}",
        gate_id=f"gate-{i}",
        state="WORK_ASSERT",
        task_type=task_type,
        outcome="correct",
        answered_by=AnsweredBy.human,
        human_response=response,
        created_n=i,
        activation=0.0,
        similarity=similarity,
        score=similarity,
    )


def ctx(chunks, lineage=()) -> RetrievalContext:
    return RetrievalContext(principal="ada", n=50, phase="posterior", chunks=chunks, lineage_history=list(lineage))


def test_the_same_kind_of_work_comes_first_and_other_work_is_marked():
    # The same words, equally similar: only the kind of work differs.
    c = ctx(
        [
            chunk(1, "Please run the docs build before sending this.", "patch-bump", similarity=0.7),
            chunk(2, "Please run the docs build before you send this one.", "docs", similarity=0.6),
            chunk(3, "Fine for a patch bump, the changelog entry reads well.", "patch-bump", similarity=0.8),
        ]
    )
    items = rank(c, request(), ARTIFACT)
    first = items[0]
    assert first.chunk_id == "c2" and first.task_type == "docs" and not first.other_work
    other = [i for i in items if i.chunk_id in ("c1", "c3")]
    assert other and all(i.other_work and i.task_type == "patch-bump" for i in other)
    assert other[0].source_note("docs") == "said on a patch-bump gate, not docs"
    assert first.source_note("docs") == ""


def test_a_lineage_verdict_is_this_work():
    lineage = [
        LineageVerdict(
            chunk_id="c9", gate_id="gate-9", action="correct", n=9, response="Please add the docs build step.", ago=41
        )
    ]
    [item] = pre_review(ctx([], lineage), request(), ARTIFACT)
    assert item.lineage and not item.other_work


def test_an_item_kept_before_it_knew_its_kind_is_not_marked():
    old = PreReviewItem.model_validate(
        {"text": "Run the docs build.", "score": 1.0, "chunk_id": "c1", "n": 1, "action": "correct"}
    )
    assert not old.other_work and old.source_note("docs") == ""


def test_gate_show_and_the_demo_say_where_other_work_was_said():
    import io

    from rich.console import Console

    from vicar.cli.gate_render import gate_page
    from vicar.demo import DemoSummary, render_summary
    from vicar.models import Action, GateResult
    from vicar.models.view import GateView

    items = rank(
        ctx([chunk(3, "Fine for a patch bump, the changelog entry reads well.", "patch-bump")]), request(), ARTIFACT
    )
    view = GateView(
        gate_id="g-new",
        workflow_id="vicar-gate/g-new",
        workflow_status="running",
        status="escalated",
        principal="ada",
        state="WORK_ASSERT",
        task_type="docs",
        question="Merge this change?",
        prereview=items,
    )
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(gate_page(view))
    assert "on gate gate-3 (interaction 3), said on a patch-bump gate, not docs" in out.getvalue()

    result = GateResult(
        gate_id="g-new",
        principal="ada",
        state="WORK_ASSERT",
        task_type="docs",
        action=Action.approve,
        text="Fine.",
        confidence=0.9,
        prior_confidence=0.9,
        calibration_guard="passthrough",
        escalated=False,
        answered_by=AnsweredBy.proxy,
        n=4,
        prereview=items,
    )
    out = io.StringIO()
    summary = DemoSummary(results=[result], seconds=1.0, memory_chunks=1, memory_human=1)
    render_summary(summary, Console(file=out, width=200, color_system=None), "ada")
    assert "- (said on a patch-bump gate, not docs) Fine for a patch bump" in out.getvalue()


async def test_a_real_gates_evidence_marks_other_work(harness):
    """As on the demo's waiting docs gate: the person's words on dependency bumps come
    back on a docs gate marked as said on other work, through the worker, the gate's
    details and its view; the docs words first."""
    from vicar.client import get_gate
    from vicar.client.gates import start_gate

    from .conftest import record_answer, wait_escalated

    h = harness
    p = h.principal()
    memory = h.registry.get(p)
    bump = h.request(p, task_type="dependency-bump", state="WORK_ASSERT", artifact="Bump rich from 13.7.0 to 13.7.1.")
    record_answer(memory, bump, 1, "approve", "Fine for a patch bump with green CI.")
    docs = h.request(p, task_type="docs", state="WORK_ASSERT", artifact="Fix a typo in docs/install.md.")
    record_answer(memory, docs, 2, "correct", "Please run the docs build before sending this.", predicted="correct")
    req = h.request(
        p,
        task_type="docs",
        state="WORK_ASSERT",
        artifact="Fix another typo in docs/install.md.",
        escalation_mode="always",
    )
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    view = await (await get_gate(h.client, req.gate_id)).view()
    marks = {i.text: (i.task_type, i.other_work, i.source_note("docs")) for i in view.prereview}
    assert marks.get("Please run the docs build before sending this.") == ("docs", False, ""), marks
    # Retrieved as similar work (the gate's own retrieval keeps to docs), and marked.
    assert marks.get("Fine for a patch bump with green CI.") == (
        "dependency-bump",
        True,
        "said on a dependency-bump gate, not docs",
    ), marks
    assert view.prereview[0].task_type == "docs"
    await handle.terminate(reason="test: done")
