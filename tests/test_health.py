"""`vicar health`: approval-rate trends per state and task type, drops flagged."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from typer.testing import CliRunner

from vicar.memory.principal import PrincipalMemory
from vicar.cli import app
from vicar.config import MemoryParams
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.health import context_health
from vicar.proxy.outcomes import record_outcome

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=timezone.utc)


def records(rates: list[float], task_type="db-migration", per_session=5, by=AnsweredBy.human):
    """Sessions (one a day) whose human approval rates are `rates`."""
    out = []
    for s, rate in enumerate(rates):
        approvals = round(rate * per_session)
        for k in range(per_session):
            i = s * per_session + k
            req = GateRequest(principal="alice", gate_id=f"{task_type}-{i}", state="PLAN_ASSERT",
                              task_type=task_type, question="Approve the plan?")
            out.append(OutcomeRecord(request=req, n=i + 1, workflow_id=f"w/{task_type}/{i}",
                                     action=Action.approve if k < approvals else Action.correct,
                                     response_text="", answered_by=by, at=T0 + timedelta(days=s, minutes=k)))
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
    # 59 right predictions at 0.9 prove the default 5% (bound 0.0495); a state may ask for more.
    memory = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        guess = PassResult(prose="ok", confidence=0.9, action=Action.approve)
        for r in records([1.0] * 12, task_type="docs")[:59]:
            record_outcome(memory, r.model_copy(update={"posterior": guess, "workflow_id": "p" + r.workflow_id}),
                           artifacts=False)
    finally:
        memory.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert ["PLAN_ASSERT", "docs", "0.05", "0.90", "0.050", "59", "0", "0.05"] in rule_rows(result.output)
    (tmp_path / "principals" / "alice" / "autonomy.json").write_text(
        '{"states": {"PLAN_ASSERT": {"target_error": 0.01, "audit_share": 0.2}}}')
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=200)
    assert ["PLAN_ASSERT", "docs", "0.01", "none", "0.050", "59", "0", "0.2"] in rule_rows(result.output)
    missing = CliRunner().invoke(app, ["health", "nobody"])
    assert missing.exit_code == 3 and "no memory for principal 'nobody'" in missing.output
