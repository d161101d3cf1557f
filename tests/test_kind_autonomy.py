"""Autonomy per kind of action, on a real server: a person's "wrong" on one lone answer takes
that kind back at once and nothing else; their reject of a gate a rule sent them is theirs,
not the proxy's error; a kind they have not answered goes to them."""

from __future__ import annotations

from vicar.client import add_rule
from vicar.client.audit import review_gate
from vicar.models import AnsweredBy

from .test_gate import run_answering


def command_gate(h, p, lineage: str, text: str):
    """A gate of one kind of action, as the coding-agent hook names it (its lineage)."""
    return h.request(
        p, task_type="bash", artifact=f"$ {text}\n", lineage=lineage, question=f"Run `{text}`?", state="INTENT_ASSERT"
    )


async def earn(h, p, lineage: str, text: str, most: int = 12):
    """Approve gates of one kind until the proxy answers one alone; that lone result."""
    for i in range(most):
        result = await run_answering(h, command_gate(h, p, lineage, f"{text} {i % 3}"), text="fine")
        if result.answered_by is AnsweredBy.proxy:
            return result
    raise AssertionError(f"{lineage} was never answered alone in {most} gates")


async def test_a_wrong_withdraws_that_kind_at_once_and_nothing_else(harness):
    h = harness
    p = h.principal()
    await earn(h, p, "bash:git status", "git status")
    lone = await earn(h, p, "bash:ls", "ls -la")
    # The person says the lone `ls` was wrong (inbox, CLI and review all record this).
    await review_gate(h.client, lone.gate_id, "wrong", "alice", note="not in that directory", task_queue=h.task_queue)
    nxt = await run_answering(h, command_gate(h, p, "bash:ls", "ls -la 1"), text="fine")
    assert nxt.escalated and nxt.answered_by is AnsweredBy.human
    assert nxt.calibration_guard == "unsupported", nxt.calibration_note
    assert "wrong" in nxt.calibration_note
    other = await run_answering(h, command_gate(h, p, "bash:git status", "git status 2"), text="fine")
    assert other.answered_by is AnsweredBy.proxy and not other.escalated  # another kind stays earned
    # The person's own answers re-earn it: three more approvals of `ls`, then alone again.
    again = await earn(h, p, "bash:ls", "ls -la")
    assert again.answered_by is AnsweredBy.proxy


async def test_a_kind_never_answered_goes_to_the_person(harness):
    h = harness
    p = h.principal()
    await earn(h, p, "bash:git status", "git status")
    new = await run_answering(h, command_gate(h, p, "bash:kubectl get", "kubectl get pods"), text="fine")
    assert new.escalated and new.calibration_guard == "unsupported"
    assert "not answered before" in new.calibration_note


async def test_a_reject_of_a_rule_asked_gate_leaves_the_proxys_autonomy(harness):
    h = harness
    p = h.principal()
    await earn(h, p, "bash:git push", "git push origin feature")
    await add_rule(h.client, p, dict(name="no-main", effect="ask", words=["main"]), by="alice", task_queue=h.task_queue)
    asked = await run_answering(
        h, command_gate(h, p, "bash:git push", "git push origin main"), action="reject", text="not to main"
    )
    assert asked.escalated and asked.calibration_guard == "rule" and asked.action.value == "reject"
    stats = h.registry.get(p).stats()
    # The same kind, not flagged by the rule: still answered alone, and `git status` is not
    # withdrawn either (the reject was the person's decision, not the proxy's error).
    after = await run_answering(h, command_gate(h, p, "bash:git push", "git push origin feature 1"), text="fine")
    assert after.answered_by is AnsweredBy.proxy, after.calibration_note
    assert h.registry.get(p).stats().human_answered == stats.human_answered


async def test_ask_me_first_keeps_that_kind_with_the_person(harness):
    from vicar.client.gates import answer_gate, start_gate
    from vicar.models import HumanAnswer

    from .conftest import wait_escalated

    h = harness
    p = h.principal()
    await earn(h, p, "bash:git status", "git status")
    for i in range(2):
        await run_answering(h, command_gate(h, p, "bash:git log", f"git log -{i + 1}"), text="fine")
    req = command_gate(h, p, "bash:git log", "git log -3")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(
        h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder="alice", ask_first=True)
    )
    await handle.result()
    for i in range(3):
        nxt = await run_answering(h, command_gate(h, p, "bash:git log", f"git log -{4 + i}"), text="fine")
        assert nxt.escalated and nxt.calibration_guard == "unsupported", nxt.calibration_note
        assert "asked to be asked first" in nxt.calibration_note
    other = await run_answering(h, command_gate(h, p, "bash:git status", "git status 7"), text="fine")
    assert other.answered_by is AnsweredBy.proxy  # nothing else is taken back
