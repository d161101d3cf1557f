"""The demo's reasons (issue 37 item 5): each escalation in words with its numbers as the
detail, and never a raw memory id (c-900daaf3...), whichever guard fired. The demo's
own renderer over results as the gate returns them, printed to a real rich Console."""

from __future__ import annotations

import io
import re

from rich.console import Console

from vicar.demo import DemoSummary, render_summary
from vicar.memory.chunk import chunk_id_for
from vicar.models import Action, AnsweredBy, GateDetails, GateResult, GateStatus
from vicar.models.prereview import PreReviewItem

A, B = chunk_id_for("alice", "vicar-gate/one"), chunk_id_for("alice", "vicar-gate/two")
TENSION = f"memories {A} (approve, N=3) and {B} (correct, N=5) disagree on a case like this one"


def _result(n: int, guard: str, note: str, **kw) -> GateResult:
    return GateResult(
        gate_id=f"demo-{n}",
        principal="alice",
        state="PLAN_ASSERT",
        task_type="docs",
        action=Action.approve,
        text="Fine.",
        confidence=0.5,
        prior_confidence=0.5,
        calibration_guard=guard,
        calibration_note=note,
        escalated=True,
        answered_by=AnsweredBy.human,
        responder="alice",
        n=n,
        **kw,
    )


def _shown(n: int, guard: str, note: str, **kw) -> GateDetails:
    return GateDetails(
        gate_id=f"demo-{n}",
        principal="alice",
        state="PLAN_ASSERT",
        task_type="docs",
        status=GateStatus.escalated,
        question="Approve the plan?",
        proxy_action=Action.approve,
        proxy_text="Looks fine.",
        calibration_guard=guard,
        calibration_note=note,
        **kw,
    )


def test_the_demo_prints_reasons_in_words_and_no_memory_ids():
    unproven = "score 0.62 < proven threshold 0.87 (bound 0.345 over 11 answers, target 0.4)"
    # A pre-review item from a memory with no gate id of its own (stored directly).
    item = PreReviewItem(text="Check the rollback.", action="correct", chunk_id=A, gate_id="", n=3, score=0.9)
    summary = DemoSummary(
        results=[_result(7, "tension", TENSION), _result(8, "unproven", unproven, prereview=[item])],
        seconds=1.0,
        memory_chunks=2,
        memory_human=2,
        escalations={
            "demo-7": _shown(7, "tension", TENSION, proxy_confidence=0.5),
            "demo-8": _shown(8, "unproven", unproven, proxy_confidence=0.62, autonomy_threshold=0.87),
        },
    )
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=200, color_system=None), "alice")
    said = out.getvalue()
    assert not re.search(r"\bc-[0-9a-f]{8}", said), said
    reasons = dict(re.findall(r"^  N (\d+): \w+: (.+)$", said.split("Why each escalated gate", 1)[1], re.M))
    assert reasons["7"] == (
        "Your past answers to cases like this disagree with each other "
        "(the approve at N 3 and the correct at N 5 disagree on a case like this one)"
    )
    assert reasons["8"].startswith("Vicar is 62% sure; it acts alone only from 87% here (score 0.62 <")
    assert "Check the rollback. (correct on an earlier gate, interaction 3)" in said
