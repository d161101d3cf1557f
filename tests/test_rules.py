"""The human's rules, pure: what a rule matches (globs, whole words, RE2 only), the
precedence among pauses and rules, and the bounds on what a principal may store."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from vicar.models import GateRequest
from vicar.models.control import (
    MAX_CONTROL_BYTES,
    MAX_RULES,
    Control,
    ControlChange,
    Rule,
    apply_change,
)
from vicar.proxy.rules import matches, verdict

NOW = datetime(2026, 11, 25, 17, 0, tzinfo=UTC)


def req(**kw) -> GateRequest:
    base = dict(principal="alice", gate_id="g-1", state="PLAN_ASSERT", task_type="docs", question="Approve?")
    return GateRequest(**(base | kw))


def rule(name: str = "r", effect: str = "ask", **kw) -> Rule:
    return Rule(name=name, effect=effect, author="alice", **kw)


def test_words_match_whole_words_case_insensitively_across_whitespace():
    r = rule(words=["DROP TABLE"])
    assert matches(r, req(), "fix a typo; also drop   table users;", None)
    assert matches(r, req(), "x\nDROP\nTABLE y", None)
    assert not matches(r, req(), "DROP TABLES is not the same", None)
    assert not matches(r, req(), "BACKDROP TABLE", None)
    # A word that ends in punctuation still matches where it stands.
    assert matches(rule(words=["rm -rf /"]), req(), "then rm -rf / at once", None)


def test_text_in_chooses_the_artifact_or_the_question():
    art = rule(words=["secret"], text_in="artifact")
    q = rule(words=["secret"], text_in="question")
    request = req(question="Publish the secret?")
    assert not matches(art, request, "nothing here", None)
    assert matches(q, request, "nothing here", None)


def test_globs_over_the_artifact_paths_and_every_condition_must_hold():
    r = rule(paths=["migrations/*.sql"], task_types=["DB-Migration"])
    assert r.task_types == ["db-migration"]  # lower-cased as the request's
    hit = req(task_type="db-migration", artifact_paths=["migrations/0001_init.sql"])
    assert matches(r, hit, "", None)
    assert not matches(r, req(task_type="docs", artifact_paths=["migrations/0001_init.sql"]), "", None)
    assert not matches(r, req(task_type="db-migration", artifact_paths=["docs/a.md"]), "", None)
    assert matches(
        rule(states=["WORK_ASSERT"], upstream_agents=["coder"]),
        req(state="WORK_ASSERT", upstream_agent="coder"),
        "",
        None,
    )
    assert not matches(rule(upstream_agents=["coder"]), req(), "", None)
    assert matches(rule(lineages=["topic/x"]), req(), "", "topic/x")


def test_regex_is_re2_only_and_linear():
    with pytest.raises(ValidationError, match="linear-time RE2"):
        rule(regex=r"(a)\1")  # a back-reference
    with pytest.raises(ValidationError, match="linear-time RE2"):
        rule(regex=r"DROP(?=\s+TABLE)")  # a look-ahead
    # The pattern that backtracks exponentially in Python's re runs in linear time here.
    r = rule(regex=r"^(a+)+$")
    hostile = "a" * 100_000 + "!"
    started = time.perf_counter()
    assert not matches(r, req(), hostile, None)
    assert time.perf_counter() - started < 1.0
    assert matches(rule(regex=r"(?i)drop\s+table"), req(), "drop  TABLE", None)


def test_a_rule_needs_a_condition_a_name_and_bounded_sizes():
    with pytest.raises(ValidationError, match="at least one condition"):
        Rule(name="all", effect="approve")
    with pytest.raises(ValidationError, match="invalid rule name"):
        rule(name="../x", words=["a"])
    with pytest.raises(ValidationError, match="at most 20 words"):
        rule(words=[f"w{i}" for i in range(21)])
    with pytest.raises(ValidationError, match="at most 500"):
        rule(regex="a" * 2001)
    # A person's rule: 500 characters, refused when it comes in (a default rule may be longer).
    with pytest.raises(ValueError, match="at most 500"):
        apply_change(Control(), ControlChange(op="add_rule", by="alice", rule=rule(regex="a" * 501)), NOW)


def test_changes_are_bounded_and_idempotent():
    c = Control()
    add = ControlChange(op="add_rule", by="alice", rule=rule(name="r0", words=["x"]))
    c = apply_change(c, add, NOW)
    assert apply_change(c, add, NOW) == c  # a retried add
    with pytest.raises(ValueError, match="exists with other conditions"):
        apply_change(c, ControlChange(op="add_rule", by="alice", rule=rule(name="r0", words=["y"])), NOW)
    for i in range(1, MAX_RULES):
        c = apply_change(c, ControlChange(op="add_rule", by="alice", rule=rule(name=f"r{i}", words=["x"])), NOW)
    with pytest.raises(ValueError, match=f"at most {MAX_RULES} rules"):
        apply_change(c, ControlChange(op="add_rule", by="alice", rule=rule(name="one-more", words=["x"])), NOW)
    big = Control()
    with pytest.raises(ValueError, match=f"bound of {MAX_CONTROL_BYTES}"):
        for i in range(MAX_RULES):
            words = [f"{i}-{j}-" + "w" * 190 for j in range(20)]
            big = apply_change(big, ControlChange(op="add_rule", by="a", rule=rule(name=f"b{i}", words=words)), NOW)
    c = apply_change(c, ControlChange(op="remove_rule", by="alice", name="r0"), NOW)
    assert [r.name for r in c.rules][:1] == ["r1"]
    assert c.rules[0].author == "alice" and c.rules[0].created == NOW


def test_precedence_pause_then_ask_then_the_first_answer_rule():
    c = Control()
    for r in (
        rule(name="ok-docs", effect="approve", task_types=["docs"]),
        rule(name="no-drop", effect="reject", words=["drop table"]),
        rule(name="ask-users", effect="ask", words=["users"]),
    ):
        c = apply_change(c, ControlChange(op="add_rule", by="bob", rule=r), NOW)
    v = verdict(c, req(), "a typo", None)
    assert v is not None and not v.escalate and v.rule is not None and v.rule.name == "ok-docs"
    v = verdict(c, req(), "drop table users", None)
    assert v is not None and v.escalate and v.rule is not None and v.rule.name == "ask-users"
    assert verdict(c, req(task_type="ops"), "nothing", None) is None
    # An answer rule cannot answer a question: it asks.
    v = verdict(c, req(kind="question"), "a typo", None)
    assert v is not None and v.escalate
    # A pause in scope wins over every rule; out of scope it does nothing.
    c = apply_change(c, ControlChange(op="pause", by="carol", task_type="docs"), NOW)
    v = verdict(c, req(), "a typo", None)
    assert (
        v is not None
        and v.escalate
        and v.guard == "paused"
        and v.reason.startswith("paused by carol at 2026-11-25 17:00")
    )
    assert verdict(c, req(task_type="ops"), "nothing", None) is None
    c = apply_change(c, ControlChange(op="resume", by="carol", task_type="ops"), NOW)
    assert len(c.pauses) == 1  # another scope's resume leaves it
    c = apply_change(c, ControlChange(op="resume", by="carol"), NOW)
    assert c.pauses == []


def test_an_overruled_gate_asks_whatever_its_escalation_mode():
    from vicar.models import Action, Calibration, PassResult
    from vicar.proxy.decision import decide

    sure = Calibration(confidence=0.99, guard="passthrough", autonomous=True)
    guess = PassResult(prose="Fine.", confidence=0.99, action=Action.approve)
    for mode in ("never", "when_unsure", "always"):
        assert decide(req(escalation_mode=mode), sure, guess, overruled=True).escalate
    assert not decide(req(escalation_mode="never"), sure, guess).escalate


def test_hostile_rule_commands_are_one_line_and_exit_2(tmp_path, monkeypatch):
    """Refused before any connection (nothing listens at the address given)."""
    from typer.testing import CliRunner

    from vicar.cli import app

    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    for args, why in [
        (["rules", "add", "../x", "r", "--effect", "ask", "--word", "a"], "invalid principal"),
        (["rules", "add", "alice", "r", "--effect", "ask", "--regex", "(a)\\1"], "linear-time RE2"),
        (["rules", "add", "alice", "r", "--effect", "approve"], "at least one condition"),
        (["rules", "add", "alice", "r", "--effect", "ask", "--word", "a", "--in", "nowhere"], "text_in"),
        (["rules", "add", "alice", "a/b", "--effect", "ask", "--word", "a"], "invalid rule name"),
        (["rules", "list", "../x"], "invalid principal"),
        (["principal", "pause", "../x"], "invalid principal"),
        (["principal", "resume", "alice", "--by", "\x07"], "invalid name"),
    ]:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert why in result.output and result.output.count("\n") == 1 and "Traceback" not in result.output
