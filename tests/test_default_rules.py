"""Vicar's default rules: what cannot be undone is asked, out of the box, and the person can
remove (and restore) a default rule like their own.

Real command lines (tests/fixtures/commands/): every destructive one is asked by a default
rule, through the gate the Claude Code hook opens for it; no routine one is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vicar.hooks.tool_call import gate_request
from vicar.models import GateRequest
from vicar.models.control import DEFAULT_RULES, Control, ControlChange, Rule, apply_change, compile_regex
from vicar.proxy.lineage import lineage_of
from vicar.proxy.reasons import ReasonFacts, reason_words
from vicar.proxy.rules import verdict
from vicar.settings import Settings

COMMANDS = Path(__file__).parent / "fixtures" / "commands"
FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
DESTRUCTIVE = [c for c in (COMMANDS / "destructive.txt").read_text().splitlines() if c.strip()]
ROUTINE = [c for c in (COMMANDS / "routine.txt").read_text().splitlines() if c.strip()]


def hook_gate(command: str) -> GateRequest:
    call = {
        "session_id": "s-1",
        "cwd": "/home/user/project",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": ""},
        "tool_use_id": "toolu_1",
    }
    return gate_request(call, Settings(), "alice")


def asked(request: GateRequest, control: Control | None = None) -> str | None:
    v = verdict(control or Control(), request, request.artifact_text, lineage_of(request).lineage)
    return v.rule.name if v is not None and v.escalate and v.rule is not None else None


@pytest.mark.parametrize("command", DESTRUCTIVE)
def test_every_destructive_command_is_asked(command: str) -> None:
    assert asked(hook_gate(command)), command


def test_no_routine_command_is_asked() -> None:
    routine = ROUTINE + [
        json.loads(f.read_text())["tool_input"]["command"]
        for f in sorted(FIXTURES.glob("*bash*.json"))
        if "rm -rf" not in f.read_text()  # permission_request_bash.json asks to rm -rf node_modules
    ]
    alarms = [(c, asked(hook_gate(c))) for c in routine if asked(hook_gate(c))]
    assert not alarms, alarms


def test_a_gate_artifact_is_read_too() -> None:
    """An orchestrator's gate: the default rules read its artifact and question."""
    plan = "Migration plan:\n1. back up\n2. DROP TABLE legacy_orders;\n3. deploy"
    req = GateRequest(
        principal="alice",
        gate_id="g-1",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve the plan?",
        artifact_text=plan,
    )
    assert asked(req) == "default-drop-data"
    tf = (
        "Terraform will perform the following actions:\n"
        "  # aws_instance.web will be destroyed\n"
        "Plan: 0 to add, 0 to change, 1 to destroy."
    )
    req = req.model_copy(update={"artifact_text": tf, "task_type": "infra"})
    assert asked(req) == "default-destroy-infrastructure"
    calm = "Plan: 2 to add, 1 to change, 0 to destroy."
    assert asked(req.model_copy(update={"artifact_text": calm})) is None


def test_each_default_says_why_and_is_linear_time() -> None:
    for r in DEFAULT_RULES:
        assert r.name.startswith("default-") and r.author == "vicar" and r.why and r.effect.value == "ask"
        compile_regex(r.regex)  # RE2: no backtracking, bounded memory
    # Linear on hostile input: a long line of what the patterns look for, unfinished.
    req = hook_gate("git " + "-C x " * 3000 + "push" + " a" * 3000)
    assert asked(req) is None or asked(req)  # returns, whatever it says


def test_removed_like_a_rule_of_their_own_and_restored() -> None:
    req = hook_gate("npm publish")
    assert asked(req) == "default-publish"
    change = ControlChange(op="remove_rule", by="alice", name="default-publish")
    control = apply_change(Control(), change, None)
    assert control.removed_defaults == ["default-publish"] and not control.empty() and control.version == 1
    assert asked(req, control) is None
    assert asked(hook_gate("git push --force"), control) == "default-rewrite-history"  # nothing else removed
    again = apply_change(control, change, None)
    assert again == control  # a retried removal changes nothing
    restored = apply_change(control, ControlChange(op="restore_rule", by="alice", name="default-publish"), None)
    assert asked(req, restored) == "default-publish" and restored.removed_defaults == []
    with pytest.raises(ValueError, match="not one of Vicar's default rules"):
        apply_change(Control(), ControlChange(op="restore_rule", by="alice", name="mine"), None)
    with pytest.raises(ValueError, match="default rules"):
        rule = Rule(name="default-publish", effect="ask", task_types=["bash"])
        apply_change(Control(), ControlChange(op="add_rule", by="alice", rule=rule), None)


def test_the_card_says_which_and_why() -> None:
    v = verdict(Control(), hook_gate("terraform destroy"), "$ terraform destroy\n", None)
    assert v is not None and v.guard == "rule"
    words = reason_words(ReasonFacts(guard="rule", note=v.reason, escalated=True))
    assert "default rules" in words and "destroys cloud or cluster resources" in words, words


def test_a_default_rule_survives_the_round_trip_through_a_verdict() -> None:
    """The verdict rides in the gate's history: a default rule (longer than a person's rule
    may be) must decode where the workflow reads it."""
    from vicar.models.control import Verdict

    v = verdict(Control(), hook_gate("git push --force"), "$ git push --force\n", None)
    assert v is not None and v.rule is not None and len(v.rule.regex or "") > 500
    assert Verdict.model_validate_json(v.model_dump_json()) == v
    assert Control.model_validate_json(Control(removed_defaults=["default-publish"]).model_dump_json()).removed_defaults


def test_a_persons_reject_answers_where_a_default_would_ask_and_an_approve_does_not() -> None:
    def add(control: Control, **rule) -> Control:
        return apply_change(control, ControlChange(op="add_rule", by="alice", rule=Rule(**rule)), None)

    control = add(Control(), name="no-drops", effect="reject", words=["DROP TABLE"])
    control = add(control, name="ship-it", effect="approve", task_types=["bash"])
    drop = verdict(control, hook_gate("psql -c 'DROP TABLE users'"), "$ psql -c 'DROP TABLE users'\n", None)
    assert drop is not None and not drop.escalate and drop.rule is not None and drop.rule.name == "no-drops"
    publish = verdict(control, hook_gate("npm publish"), "$ npm publish\n", None)
    assert publish is not None and publish.escalate and publish.rule is not None
    assert publish.rule.name == "default-publish"  # the default's ask wins over an approve
    routine = verdict(control, hook_gate("npm test"), "$ npm test\n", None)
    assert routine is not None and not routine.escalate and routine.rule is not None and routine.rule.name == "ship-it"
