"""Targets the person chooses per context (issue 36 item 6): a `target` rule (e.g. 1% on
database migrations) has its own bound, the same betting rule over the evidence of the
gates it matches; a gate it matches is answered alone only where both that bound and the
pooled one hold. Real stores, the real consult's rule function, the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from vicar.cli import app
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
from vicar.models.control import Control, Rule
from vicar.proxy.autonomy import gate_rule
from vicar.proxy.control_store import keep_control
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.rules import verdict
from vicar.settings import AutonomyParams, MemoryParams

from .inbox_world import world  # noqa: F401  (the inbox's test world, module-scoped)

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
STRICT = Rule(name="db-strict", effect="target", target=0.01, author="alice", task_types=["db-migration"])
LOOSE = Rule(name="docs-loose", effect="target", target=0.2, author="alice", task_types=["docs"])


def request(i: int, task_type: str) -> GateRequest:
    return GateRequest(
        principal="alice", gate_id=f"{task_type}-{i}", state="WORK_ASSERT", task_type=task_type, question="Merge?"
    )


def answered(i: int, task_type: str, right: bool = True) -> OutcomeRecord:
    return OutcomeRecord(
        request=request(i, task_type),
        n=i,
        workflow_id=f"vicar-gate/{task_type}-{i}",
        action=Action.approve if right else Action.reject,
        response_text="",
        answered_by=AnsweredBy.human,
        at=T0 + timedelta(minutes=i),
        posterior=PassResult(prose="ok", confidence=0.9, action=Action.approve),
    )


@pytest.fixture
def memory(tmp_path, embedder):
    """alice's store: 150 right answers on docs and 40 on database migrations, all at 0.9."""
    m = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    for i in range(1, 191):
        record_outcome(m, answered(i, "docs" if i <= 150 else "db-migration"), artifacts=False)
    yield m
    m.close()


def rule_of(memory, task_type: str, base: AutonomyParams | None = None):
    base = base or AutonomyParams()
    req = request(999, task_type)
    return gate_rule(
        memory.store, memory.dir, base, "alice", "gate", req.state.value, task_type, f"g-{task_type}", request=req
    ).rule


def test_a_tighter_target_takes_autonomy_away_where_its_own_bound_does_not_hold(memory):
    pooled = rule_of(memory, "db-migration")
    assert pooled.threshold == 0.9 and pooled.target == 0.05  # 190 right answers prove 5% pooled
    assert keep_control(memory.store, Control(rules=[STRICT, LOOSE], version=1))
    strict = rule_of(memory, "db-migration")
    # 40 right answers on migrations cannot prove 1% (a spotless record needs hundreds).
    assert strict.threshold is None and strict.withdrawn.startswith("target rule db-strict: its own bound over")
    assert "not within its target 0.01 at 95% confidence" in strict.withdrawn and "over 40 graded" in strict.withdrawn
    # A looser target on docs grants nothing beyond the pooled rule: the pooled threshold stands.
    assert rule_of(memory, "docs") == pooled
    # ... and nothing where the pooled rule proves nothing (both must hold).
    (memory.dir / "autonomy.json").write_text('{"target_error": 0.001}')
    assert rule_of(memory, "docs").threshold is None
    # A target rule never decides a gate itself: no verdict, the proxy (under it) decides.
    assert verdict(Control(rules=[STRICT]), request(1, "db-migration"), "", None) is None


def test_a_target_rule_proves_its_own_threshold_over_the_gates_it_matches(memory):
    """5 wrong migrations at 0.9, then 300 right at 0.99: the pooled 5% holds from 0.9 (5
    wrong of 495), a 2% target on migrations only from 0.99, where its own evidence is:
    the gate is under the higher threshold, stated with that rule's numbers."""
    scored = [(i, 0.9, False) for i in range(191, 196)] + [(i, 0.99, True) for i in range(196, 496)]
    for i, conf, right in scored:
        guess = PassResult(prose="ok", confidence=conf, action=Action.approve)
        record_outcome(
            memory, answered(i, "db-migration", right).model_copy(update={"posterior": guess}), artifacts=False
        )
    pooled = rule_of(memory, "db-migration")
    assert pooled.threshold == 0.9 and pooled.target == 0.05
    keep_control(memory.store, Control(rules=[STRICT.model_copy(update={"target": 0.02})], version=1))
    own = rule_of(memory, "db-migration")
    assert (own.threshold, own.target, own.evidence, own.errors) == (0.99, 0.02, 300, 0)
    assert rule_of(memory, "docs") == pooled  # the rule does not match docs


def test_a_target_rule_is_written_with_its_target_and_shown_by_health(tmp_path, embedder, monkeypatch):
    with pytest.raises(ValidationError, match="needs its target error"):
        Rule(name="x", effect="target", task_types=["docs"])
    with pytest.raises(ValidationError, match="goes with the effect target"):
        Rule(name="x", effect="ask", target=0.1, task_types=["docs"])
    with pytest.raises(ValidationError):
        Rule(name="x", effect="target", target=1.5, task_types=["docs"])
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    m = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        for i in range(1, 121):
            record_outcome(m, answered(i, "db-migration"), artifacts=False)
        keep_control(m.store, Control(rules=[STRICT], version=1))
    finally:
        m.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=300)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (
        "Target rule db-strict (target 0.01 where task type is db-migration; both it and the pooled rule must hold): "
        "none proven: the proxy answers nothing alone (error bound" in said
    ), said
    assert "over all 120 graded answers pooled over the gates rule db-strict matches, 0 wrong)" in said


def test_the_cli_refuses_a_target_rule_without_its_target_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    for extra, said in (
        ([], "a target rule needs its target error"),
        (["--target", "2"], "target"),
        (["--target", "lots"], "valid number"),
    ):
        args = ["rules", "add", "alice", "db-strict", "--effect", "target", "--task-type", "db-migration", *extra]
        result = CliRunner().invoke(app, args, terminal_width=300)
        assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output, result.output


async def test_a_target_rule_added_in_the_page_is_kept_with_its_target(world):
    from vicar.client import get_control

    from .inbox_world import signed_in

    w = world
    ctx, page = await signed_in(w, "alice")
    await page.goto(f"{w.base}/rules")
    section = page.locator("section.control", has_text=w.p)
    await section.get_by_text("Add a rule").click()
    await section.get_by_label("Name").fill("migrations-1pc")
    await section.get_by_label("Then").select_option("target")
    await section.get_by_label("Task types").fill("db-migration")
    await section.get_by_role("button", name="Add the rule").click()
    said = (await section.locator("p.error").inner_text()).strip()
    assert said == "rule not added: input: a target rule needs its target error (--target), e.g. 0.01", said
    await section.get_by_label("My target error").fill("0.01")
    await section.get_by_role("button", name="Add the rule").click()
    await page.wait_for_url(f"{w.base}/rules")
    assert (
        "migrations-1pc: target 0.01 when task type is db-migration"
        in await section.locator("ul.rules:not(.defaults)").inner_text()
    )
    (rule,) = (await get_control(w.h.client, w.p)).rules
    assert (rule.effect.value, rule.target, rule.task_types, rule.author) == ("target", 0.01, ["db-migration"], "alice")
    await page.goto(f"{w.base}/health?principal={w.p}")
    shown = " ".join((await page.locator("section.targets").inner_text()).split())
    assert "migrations-1pc: error within 0.01 where task type is db-migration" in shown, shown
    await ctx.close()


def test_the_consults_calibration_reads_the_target_rules(memory):
    """Through the consult's own functions (retrieval, calibration_inputs, calibrate): a
    migration gate scoring 0.95 is not answered alone under the 1% target rule, the rule
    named in the note; a docs gate is under the pooled rule as before."""
    from vicar.proxy.calibration import calibrate, calibration_inputs
    from vicar.proxy.retrieval import contexts
    from vicar.settings import Settings

    settings = Settings.from_env()
    keep_control(memory.store, Control(rules=[STRICT], version=1))

    def calibrated(task_type: str):
        req = request(1000, task_type)
        _, post = contexts(memory, req, 1000, "", settings)
        inp = calibration_inputs(memory, req, post, settings.calibration, now=None, gate_key=f"vicar-gate/{task_type}")
        return inp.rule, calibrate(0.95, inp, settings.calibration)

    rule, cal = calibrated("db-migration")
    assert rule.threshold is None and "unproven" in cal.fired and not cal.autonomous
    assert rule.withdrawn.startswith("target rule db-strict")
    rule, cal = calibrated("docs")
    assert rule.threshold == 0.9 and "unproven" not in cal.fired
