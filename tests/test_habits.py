"""Habits become rules the person accepts: a run of identical answers on one kind of action
is offered as a rule, never applied without the person's tap, and then answers."""

from __future__ import annotations

from vicar.client import add_rule
from vicar.models import AnsweredBy, OutcomeRecord
from vicar.models.control import Control, ControlChange, apply_change
from vicar.proxy.control_store import kept_control
from vicar.proxy.habits import suggestions

from .test_gate import run_answering
from .test_kind_autonomy import command_gate


def records_of(h, p) -> list[OutcomeRecord]:
    store = h.registry.get(p).store
    return [OutcomeRecord.model_validate_json(r) for _, r in store.outcomes(answered_by="human")]


async def test_five_approvals_of_a_kind_suggest_a_rule_that_answers_once_accepted(harness):
    h = harness
    p = h.principal()
    for i in range(4):
        await run_answering(h, command_gate(h, p, "bash:git status", f"git status {i}"), text="fine")
    assert suggestions(records_of(h, p), None) == []  # four: not yet
    await run_answering(h, command_gate(h, p, "bash:git status", "git status -s"), text="fine")
    # A kind answered both ways is never offered; nor one a default rule asks about.
    for i, action in enumerate(["approve"] * 3 + ["reject"] * 2):
        await run_answering(h, command_gate(h, p, "bash:git push", f"git push origin f{i}"), action=action, text="x")
    offered = suggestions(records_of(h, p), kept_control(h.registry.get(p).store))
    assert [s.rule.name for s in offered] == ["habit-bash-git-status"]
    s = offered[0]
    assert s.answers == 5 and "approved it 5 times" in s.words and "git status" in s.words
    assert s.rule.effect.value == "approve" and s.rule.lineages == ["bash:git status"]
    # Nothing is applied until the person accepts it: the next gate is still theirs or the proxy's.
    before = await run_answering(h, command_gate(h, p, "bash:git status", "git status 9"), text="fine")
    assert before.answered_by is not AnsweredBy.rule
    await add_rule(h.client, p, s.rule.model_dump(mode="json"), by="alice", task_queue=h.task_queue)
    after = await run_answering(h, command_gate(h, p, "bash:git status", "git status --short"), text="fine")
    assert after.answered_by is AnsweredBy.rule and after.action.value == "approve"
    assert suggestions(records_of(h, p), kept_control(h.registry.get(p).store)) == []  # taken


def test_no_suggestion_where_a_rule_asks_or_answers_already() -> None:
    from datetime import UTC, datetime

    from vicar.models import Action, Calibration, GateRequest

    def rec(i: int, command: str, lineage: str, guard: str = "unproven") -> OutcomeRecord:
        req = GateRequest(
            principal="alice",
            gate_id=f"g{i}",
            state="INTENT_ASSERT",
            task_type="bash",
            question=f"Run {command}?",
            artifact_text=f"$ {command}\n",
            lineage=lineage,
        )
        cal = Calibration(confidence=0.5, guard=guard)
        return OutcomeRecord(
            request=req,
            n=i,
            workflow_id=f"w{i}",
            action=Action.approve,
            response_text="ok",
            answered_by=AnsweredBy.human,
            calibration=cal,
            at=datetime.now(UTC),
        )

    # rm asked by Vicar's default rule: the person's approvals are their decisions.
    rm = [rec(i, "rm -rf build", "bash:rm", guard="rule") for i in range(6)]
    assert suggestions(rm, None) == []
    ls = [rec(10 + i, "ls -la", "bash:ls") for i in range(6)]
    assert [s.rule.name for s in suggestions(ls, None)] == ["habit-bash-ls"]
    mine = apply_change(Control(), ControlChange(op="add_rule", by="alice", rule=suggestions(ls, None)[0].rule), None)
    assert suggestions(ls, mine) == []  # their rule answers it already
