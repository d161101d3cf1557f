"""Where the proxy errs (issue 36 item 5): the realized error, per context, of the
answers it gave alone that were checked later (random audits, the person's reviews),
with the contexts above their target flagged and the count they rest on; in `vicar
health` (from the store, real memory), the inbox's health page (real Chromium) and
`vicar audit export` (a `vicar` process reaching the worker through Temporal only)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from vicar.cli import app
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord, PassResult
from vicar.models.audit import AuditRecord, Review
from vicar.proxy.autonomy.checked import Checked, context_errors, lower_bound
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.reviews import record_review
from vicar.settings import MemoryParams

from .inbox_world import world  # noqa: F401  (the inbox's test world, module-scoped)

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def test_each_context_rests_on_its_count_and_thin_evidence_reads_as_such():
    labels = [Checked("docs", "PLAN_ASSERT", i < 2, 0.05, "audit") for i in range(3)]
    labels += [Checked("docs", "WORK_ASSERT", i < 3, 0.05, "review") for i in range(40)]
    labels += [Checked("tests", "WORK_ASSERT", False, 0.05, "audit") for _ in range(20)]
    labels += [Checked("db", "WORK_ASSERT", i < 2, 0.01, "audit") for i in range(3)]  # a state's own target
    labels += [Checked("db", "PLAN_ASSERT", False, 0.05, "audit") for _ in range(4)]
    rows = context_errors(labels)
    got = [(r.task_type, r.target, r.states, r.checked, r.wrong, r.above, r.few) for r in rows]
    assert got == [
        ("db", 0.01, ["WORK_ASSERT"], 3, 2, True, True),
        ("docs", 0.05, ["PLAN_ASSERT", "WORK_ASSERT"], 43, 5, True, False),
        ("tests", 0.05, ["WORK_ASSERT"], 20, 0, False, False),
        ("db", 0.05, ["PLAN_ASSERT"], 4, 0, False, True),
    ]
    db, docs = rows[0], rows[1]
    assert (docs.audits, docs.reviews) == (3, 40)
    # 5 of 43 (11.6%) against 5%: above, but the 95% lower end (4.7%) is not: could be chance.
    assert abs(docs.lower - 0.0472) < 0.001 and not docs.clearly_above
    assert db.clearly_above and db.line().startswith("ABOVE TARGET: task type db (WORK_ASSERT): 2 wrong of 3 checked")
    assert docs.line().startswith("above target, could be chance: task type docs (PLAN_ASSERT, WORK_ASSERT): 5 wrong")
    assert "few checks (under 10)" in db.line() and "few" not in docs.line()
    assert lower_bound(0, 10) == 0.0 and context_errors(labels, least=10) == [rows[1], rows[2]]


def outcome(i: int, task_type: str, by: AnsweredBy, guard: str, right: bool) -> OutcomeRecord:
    req = GateRequest(
        principal="alice", gate_id=f"{task_type}-{i}", state="WORK_ASSERT", task_type=task_type, question="Merge?"
    )
    return OutcomeRecord(
        request=req,
        n=i + 1,
        workflow_id=f"vicar-gate/{task_type}-{i}",
        action=Action.approve if right or by is AnsweredBy.proxy else Action.reject,
        response_text="",
        answered_by=by,
        at=T0 + timedelta(minutes=i),
        posterior=PassResult(prose="ok", confidence=0.97, action=Action.approve),
        calibration=Calibration(confidence=0.97, score=0.97, guard=guard, target=0.05, audit_share=0.05),
    )


def test_health_shows_where_the_proxy_errs(tmp_path, embedder, monkeypatch):
    """Audited gates (the person's answer against the proxy's) and reviews of answers
    given alone, per task type: `makefile` above its target on 3 of 4 checks is flagged
    with its count, `docs` on 0 of 12 is not; the statement says what it covers."""
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        n = 0
        for _ in range(12):
            record_outcome(memory, outcome(n := n + 1, "docs", AnsweredBy.human, "audit", True), artifacts=False)
        for right in (False, True, False):
            record_outcome(memory, outcome(n := n + 1, "makefile", AnsweredBy.human, "audit", right), artifacts=False)
        alone = outcome(n := n + 1, "makefile", AnsweredBy.proxy, "passthrough", True)
        record_outcome(memory, alone, artifacts=False)
        record_review(
            memory.store,
            Review(gate_workflow_id=alone.workflow_id, verdict="wrong", reviewer="alice", at=T0),
            state="WORK_ASSERT",
            task_type="makefile",
            score=0.97,
        )
        # Human answers that were not audits say nothing of the answers given alone.
        record_outcome(memory, outcome(n := n + 1, "makefile", AnsweredBy.human, "unproven", False), artifacts=False)
    finally:
        memory.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=250)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (
        "ABOVE TARGET: task type makefile (WORK_ASSERT): 3 wrong of 4 checked (75%, target 0.05; at least 24.9% at "
        "95% confidence), few checks (under 10)" in said
    ), said
    assert "task type docs (WORK_ASSERT): 0 wrong of 12 checked (0%, target 0.05; at least 0.0%" in said
    assert "1 of 2 contexts run above their target (1 clearly, at 95% confidence)" in said
    assert "pooled over every state and task type" in said


async def test_the_inbox_and_the_export_show_where_the_proxy_errs(world):
    """The answer the proxy gave alone, reviewed wrong: one wrong of one checked, above the
    target (0.8 here) but read as thin evidence; the same figures in the export."""
    from vicar.client.audit import review_gate

    from .conftest import vicar_process
    from .inbox_world import signed_in

    w = world
    await review_gate(w.h.client, w.alone, "wrong", "alice", principal=w.p, task_queue=w.h.task_queue)
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/health?principal={w.p}")
    errs = page.locator("section.errs")
    said = " ".join((await errs.inner_text()).split())
    assert (
        # The inbox says states in words (the export, for scripts, keeps their names).
        "above target, could be chance: task type docs (plan): 1 wrong of 1 checked (100%, target 0.8; at "
        "least 5.0% at 95% confidence), few checks (under 10)" in said
    ), said
    assert "1 of 1 contexts run above their target (0 clearly, at 95% confidence)" in said
    assert await errs.locator("tr.above").count() == 1
    statement = " ".join((await page.locator("section.context").first.inner_text()).split())
    assert "pooled over every state and task type" in statement, statement
    await ctx.close()
    code, out, err = await vicar_process(
        w.h, w.h.settings.data_dir.parent / "client", "audit", "export", "--principal", w.p
    )
    assert code == 0, err
    # The records on stdout as before, one a line (the figures go to stderr).
    assert [AuditRecord.model_validate_json(x).principal for x in out.splitlines()] == [w.p] * 4
    lines = [" ".join(x.split()) for x in err.splitlines()]
    assert (
        f"{w.p}: above target, could be chance: task type docs (PLAN_ASSERT): 1 wrong of 1 checked (100%, "
        in " ".join(lines)
    )
