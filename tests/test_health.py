"""`vicar health`: approval-rate trends per state and task type, drops flagged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from vicar.cli import app
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, AutonomyRule, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.health import autonomy_rules, context_health, rule_lines, rule_statement
from vicar.proxy.outcomes import record_outcome
from vicar.settings import MemoryParams

from .conftest import rule_for

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def records(rates: list[float], task_type="db-migration", per_session=5, by=AnsweredBy.human):
    """Sessions (one a day) whose human approval rates are `rates`."""
    out = []
    for s, rate in enumerate(rates):
        approvals = round(rate * per_session)
        for k in range(per_session):
            i = s * per_session + k
            req = GateRequest(
                principal="alice",
                gate_id=f"{task_type}-{i}",
                state="PLAN_ASSERT",
                task_type=task_type,
                question="Approve the plan?",
            )
            out.append(
                OutcomeRecord(
                    request=req,
                    n=i + 1,
                    workflow_id=f"w/{task_type}/{i}",
                    action=Action.approve if k < approvals else Action.correct,
                    response_text="",
                    answered_by=by,
                    at=T0 + timedelta(days=s, minutes=k),
                )
            )
    return out


def test_a_drop_from_08_to_04_over_ten_sessions_is_flagged():
    falling = records([0.8, 0.8, 0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.4, 0.4])
    steady = records([0.8] * 10, task_type="docs")
    by = {h.task_type: h for h in context_health(falling + steady)}
    assert by["db-migration"].flagged and (by["db-migration"].earlier, by["db-migration"].later) == (0.8, 0.4)
    assert by["db-migration"].approval_rates == [0.8] * 5 + [0.4] * 5
    assert not by["docs"].flagged


def test_only_the_latest_ten_sessions_and_only_humans_count():
    old_drop_then_steady = records([1.0, 1.0, 0.2] + [0.6] * 10)
    h = context_health(old_drop_then_steady + records([0.0] * 12, by=AnsweredBy.proxy))[0]
    assert len(h.sessions) == 10 and not h.flagged and h.human_answers == 65
    assert context_health(records([0.8, 0.2]))[0].flagged is False  # too few sessions to call a trend


def test_health_command_reads_the_principals_outcomes(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        for r in records([0.8] * 5 + [0.4] * 5, per_session=5):
            record_outcome(memory, r, artifacts=False)
    finally:
        memory.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "DROP 0.80 -> 0.40" in result.output and "PLAN_ASSERT/db-migration" in result.output

    # No graded answer yet (these records carry no prediction): nothing proven.
    def rule_rows(output: str) -> list[list[str]]:
        return [[c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines() if line.count("│") == 9]

    assert ["PLAN_ASSERT", "db-migration", "0.05", "none", "1.000", "0", "0", "0.05"] in rule_rows(result.output)
    # 100 right predictions at 0.9 prove the default 5% under the betting rule (the bound,
    # valid whenever read, 0.050; a fixed-n bound needed 59, but re-read after every answer
    # it was not valid); a state may ask for more.
    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        guess = PassResult(prose="ok", confidence=0.9, action=Action.approve)
        for r in records([1.0] * 20, task_type="docs")[:100]:
            record_outcome(
                memory, r.model_copy(update={"posterior": guess, "workflow_id": "p" + r.workflow_id}), artifacts=False
            )
    finally:
        memory.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert ["PLAN_ASSERT", "docs", "0.05", "90% sure", "0.050", "100", "0", "0.05"] in rule_rows(result.output)
    (tmp_path / "principals" / "alice" / "autonomy.json").write_text(
        '{"states": {"PLAN_ASSERT": {"target_error": 0.01, "audit_share": 0.2}}}'
    )
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=200)
    assert ["PLAN_ASSERT", "docs", "0.01", "none", "0.050", "100", "0", "0.2"] in rule_rows(result.output)
    # The rule in words, from the function the demo's footer uses too.
    assert (
        "Autonomy rule for PLAN_ASSERT gates: none proven: the proxy answers nothing alone (error bound 0.050 > "
        "target 0.01 at 95% confidence, over all 100 graded answers pooled over every state and task type, 0 wrong); "
        "20% of those still go to the "
        "human (audit)." in " ".join(result.output.split())
    )
    missing = CliRunner().invoke(app, ["health", "nobody"], terminal_width=400)
    assert missing.exit_code == 3 and "no memory for principal 'nobody'" in missing.output
    assert "principals here: alice" in missing.output, missing.output


def test_health_of_nobody_lists_the_principals_there(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    empty = CliRunner().invoke(app, ["health", "nobody"], terminal_width=400)
    assert empty.exit_code == 3 and "no principal has a memory here yet" in empty.output, empty.output
    for name in ("carol", "bob", "alice-2"):
        (tmp_path / "principals" / name).mkdir(parents=True)
        (tmp_path / "principals" / name / "memory.db").write_bytes(b"")
    (tmp_path / "principals" / "half-made").mkdir()  # no memory: not a principal yet
    missing = CliRunner().invoke(app, ["health", "nobody"], terminal_width=400)
    assert missing.exit_code == 3, missing.output
    assert missing.output.strip().endswith("principals here: alice-2, bob, carol"), missing.output


def rule(**kw) -> AutonomyRule:
    return AutonomyRule(**{"target": 0.4, "delta": 0.05, "audit_share": 0.0, **kw})


def test_one_statement_of_the_rule():
    """The demo's footer and `vicar health` both print rule_lines: the rule's state, its
    evidence and its errors, once per distinct rule, naming the states it holds for."""
    assert rule_statement(rule()) == (
        "none proven: the proxy answers nothing alone (no graded answer yet; target error 0.4)."
    )
    assert rule_statement(rule(bound=0.608, evidence=18, errors=4)) == (
        "none proven: the proxy answers nothing alone (error bound 0.608 > target 0.4 at 95% confidence, "
        "over all 18 graded answers pooled over every state and task type, 4 wrong)."
    )
    proven = rule(threshold=0.41, bound=0.363, evidence=15, errors=2, audit_share=0.05)
    assert rule_statement(proven) == (
        "acts alone from 41% sure: the proxy may answer alone when it is at least 41% sure (the error of its "
        "answers that sure, pooled over every state and task type: bound 0.363 <= target 0.4 at 95% confidence "
        "whenever read, over the 15 graded answers that sure, 2 wrong), and only on a kind of action the "
        "person's own answers back; 5% of those still go to the human (audit)."
    )
    strict = rule(target=0.05, bound=0.2, evidence=15, errors=0)
    lines = rule_lines(
        {
            ("PLAN_ASSERT", "db"): proven,
            ("PLAN_ASSERT", "api"): proven,
            ("WORK_ASSERT", "docs"): proven,
            ("INTENT_ASSERT", "x"): strict,
        }
    )
    assert lines == [
        f"Autonomy rule for PLAN_ASSERT and WORK_ASSERT gates: {rule_statement(proven)}",
        f"Autonomy rule for INTENT_ASSERT gates: {rule_statement(strict)}",
    ]
    # A context the drift test withdrew is named on its own line, with the reason.
    gone = proven.model_copy(update={"threshold": None, "withdrawn": "autonomy withdrawn: audits show 4 wrong of 9"})
    lines = rule_lines({("PLAN_ASSERT", "db"): proven, ("PLAN_ASSERT", "api"): gone})
    assert lines == [
        f"Autonomy rule for PLAN_ASSERT gates: {rule_statement(proven)}",
        "Autonomy rule for PLAN_ASSERT gates of task type api: none: the proxy answers nothing alone here "
        "(autonomy withdrawn: audits show 4 wrong of 9).",
    ]


def test_the_rule_now_is_the_rule_a_consult_computes(tmp_path, embedder):
    """autonomy_rules (health, the demo's footer) and a gate's consult read the same pairs
    under the same parameters: the same rule."""
    from vicar.settings import Settings

    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        (memory.dir / "autonomy.json").write_text('{"target_error": 0.4}')
        for i, r in enumerate(records([1.0] * 3, task_type="docs")):
            guess = PassResult(prose="ok", confidence=0.5 + i / 40, action=Action.approve if i % 4 else Action.reject)
            record_outcome(memory, r.model_copy(update={"posterior": guess}), artifacts=False)
        settings = Settings.from_env()
        now = autonomy_rules(memory.store, memory.dir, settings.calibration.autonomy, [("PLAN_ASSERT", "docs")])
        consulted = rule_for(memory, records([1.0], task_type="docs")[0].request, settings.calibration)
    finally:
        memory.close()
    assert now[("PLAN_ASSERT", "docs")] == consulted and consulted.evidence == 15 and consulted.errors == 4


def test_health_shows_the_pauses_and_rules_in_force(tmp_path, embedder, monkeypatch):
    """From the brain's durable copy in the principal's store: one line per pause, and
    the number of rules, even before any human answer."""
    from vicar.models.control import Control, Pause, Rule
    from vicar.proxy.control_store import keep_control

    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    at = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)
    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        quiet = CliRunner().invoke(app, ["health", "alice"], terminal_width=400)
        assert quiet.exit_code == 0 and "Paused" not in quiet.output and "Rules in force" not in quiet.output
        control = Control(
            rules=[
                Rule(name="no-drop", effect="ask", author="alice", words=["DROP TABLE"]),
                Rule(name="db", effect="ask", author="alice", task_types=["db-migration"]),
            ],
            pauses=[Pause(by="alice", at=at), Pause(by="bob", at=at, state="PLAN_ASSERT", task_type="docs")],
            version=3,
        )
        assert keep_control(memory.store, control)
    finally:
        memory.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=400)
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    assert "Paused by alice at 2026-11-25 18:00:00 UTC for all gates: the proxy answers nothing alone there." in lines
    assert (
        "Paused by bob at 2026-11-25 18:00:00 UTC for PLAN_ASSERT / docs: the proxy answers nothing alone there."
        in lines
    )
    assert "Rules in force: 2, checked before the proxy at every gate (vicar rules list alice)." in lines, lines
