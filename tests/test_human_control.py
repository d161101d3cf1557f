"""The human stays in charge, through a real gate (Temporal dev server, real worker, real
memory): a rule or a pause written by a second process (the `vicar` CLI, with another
data directory and no access to the worker's) changes the very next gate's outcome,
whatever its escalation mode; a rule's answer is the rule's, never the proxy's evidence."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from vicar.client.gates import answer_gate, start_gate
from vicar.models import AnsweredBy, HumanAnswer
from vicar.proxy.autonomy.ledger import autonomy_pairs

from .conftest import vicar_process, wait_escalated
from .test_gate_guards import ARTIFACT, seed

# Something the person wants to be asked about that Vicar's default rules do not ask about
# (they ask about a DROP TABLE out of the box: tests/test_default_rules.py).
TTL = ARTIFACT + " Also: halve the session cache TTL."
DROP = ARTIFACT + " Also: DROP TABLE users;"


async def vicar(h, data_dir, *args: str) -> tuple[int, str, str]:
    """`vicar ARGS` in its own process (vicar_process): the worker's Temporal server,
    codec key and task queue, its own data directory."""
    return await vicar_process(h, data_dir, *args)


async def gate(h, p, artifact: str, mode: str):
    req = h.request(p, task_type="docs", artifact=artifact, escalation_mode=mode)
    return req, await start_gate(h.client, req, h.task_queue)


async def test_a_rule_or_pause_from_a_second_process_changes_the_very_next_gate(harness, tmp_path):
    h = harness
    elsewhere = tmp_path / "another-machine"
    assert not str(elsewhere).startswith(str(h.settings.data_dir))
    p = h.principal()
    seed(h, p, [("approve", "Fine.")] * 4, datetime.now(UTC) - timedelta(hours=1))
    pairs = lambda: len(autonomy_pairs(h.registry.get(p).store, "gate"))  # noqa: E731

    # Before any rule: the proxy approves it alone, in either mode.
    for mode in ("when_unsure", "never"):
        _, handle = await gate(h, p, TTL, mode)
        result = await handle.result()
        assert (result.escalated, result.answered_by, result.action.value) == (False, AnsweredBy.proxy, "approve")

    # An `ask` rule from the second process: the very next gate, in `never` mode, asks.
    code, out, err = await vicar(
        h, elsewhere, "rules", "add", p, "ask-ttl", "--effect", "ask", "--word", "cache TTL", "--by", "alice"
    )
    assert code == 0, err
    assert "ask-ttl: ask when words in the both is" in out
    req, handle = await gate(h, p, TTL, "never")
    details = await wait_escalated(h.client, req.gate_id)
    assert details.calibration_guard == "rule"
    assert details.calibration_note == "rule ask-ttl (ask, by alice)"
    assert details.proxy_action is not None  # the proxy's guess is still shown to the human
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="Keep the TTL.", responder="alice"))
    assert (await handle.result()).answered_by is AnsweredBy.human
    # ... and only where it matches.
    _, handle = await gate(h, p, ARTIFACT, "never")
    assert (await handle.result()).answered_by is AnsweredBy.proxy

    # The off switch: the next `never` gate waits for the human, with who paused and when.
    code, out, err = await vicar(h, elsewhere, "principal", "pause", p, "--by", "carol")
    assert code == 0, err
    assert f"{p} is PAUSED for all gates: paused by carol at " in out
    req, handle = await gate(h, p, ARTIFACT, "never")
    details = await wait_escalated(h.client, req.gate_id)
    assert details.calibration_guard == "paused" and details.calibration_note.startswith("paused by carol at ")
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
    await handle.result()
    code, _, err = await vicar(h, elsewhere, "principal", "resume", p, "--by", "carol")
    assert code == 0, err
    _, handle = await gate(h, p, ARTIFACT, "never")
    assert (await handle.result()).answered_by is AnsweredBy.proxy

    # An answer rule answers as the rule, with its author, and adds no evidence pair.
    code, _, err = await vicar(
        h, elsewhere, "rules", "add", p, "docs-ok", "--effect", "approve", "--task-type", "docs", "--by", "dana"
    )
    assert code == 0, err
    before = pairs()
    _, handle = await gate(h, p, ARTIFACT, "when_unsure")
    result = await handle.result()
    assert (result.answered_by, result.action.value, result.escalated) == (AnsweredBy.rule, "approve", False)
    assert (result.responder, result.calibration_guard, result.text) == (
        "dana",
        "rule",
        "Approved by dana's rule docs-ok.",
    )
    assert pairs() == before
    # The ask rule still wins over it where both match.
    req, handle = await gate(h, p, TTL, "when_unsure")
    assert (await wait_escalated(h.client, req.gate_id)).calibration_note == "rule ask-ttl (ask, by alice)"
    await handle.terminate()

    # `rules test` and `rules list -o json` read the brain from the second process too.
    code, out, err = await vicar(
        h, elsewhere, "rules", "test", p, "--task-type", "docs", "--artifact", TTL, "-o", "json"
    )
    assert code == 0, err
    assert json.loads(out)["rule"]["name"] == "ask-ttl"
    code, out, err = await vicar(h, elsewhere, "rules", "list", p, "-o", "json")
    assert [r["name"] for r in json.loads(out)["rules"]] == ["ask-ttl", "docs-ok"]
    # A clash is refused by the brain with one line and the conflict exit code.
    code, out, err = await vicar(
        h, elsewhere, "rules", "add", p, "docs-ok", "--effect", "reject", "--task-type", "docs"
    )
    assert code == 5 and err.count("\n") == 1 and "exists with other conditions" in err
    # The second process never held the principal's memory.
    assert not (elsewhere / "principals" / p).exists()


async def test_rules_and_pauses_outlive_a_terminated_brain(harness):
    """An operator may terminate a broken brain (the next gate starts a new one): the
    rules and pauses are kept in the principal's store and the new brain takes them back."""
    from vicar import contracts as c
    from vicar.client import add_rule, get_control, pause
    from vicar.models.control import Control

    h = harness
    p = h.principal()
    where = dict(task_queue=h.task_queue)
    await add_rule(h.client, p, dict(name="no-drop", effect="ask", words=["DROP TABLE"]), by="alice", **where)
    kept = await pause(h.client, p, by="carol", task_type="ops", **where)
    assert kept.version == 2
    await h.client.get_workflow_handle(c.brain_workflow_id(p)).terminate("broken")
    assert await get_control(h.client, p) == Control()  # no brain runs
    req, handle = await gate(h, p, DROP, "never")
    details = await wait_escalated(h.client, req.gate_id)
    assert (details.calibration_guard, details.calibration_note) == ("rule", "rule no-drop (ask, by alice)")
    assert await get_control(h.client, p) == kept
    await handle.terminate()


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
async def test_record_control_histories(harness):
    """Histories of the gate under the human's control (asked by a rule, answered by one,
    paused) and of a brain that took changes and kept them, for test_replay_histories.py
    (recorded as it says, with VICAR_RECORD_HISTORIES=<label>)."""
    from vicar import contracts as c
    from vicar.client import add_rule, pause, resume

    from .test_replay_histories import _save

    h = harness
    p = h.principal()
    where = dict(task_queue=h.task_queue)
    await add_rule(h.client, p, dict(name="no-drop", effect="ask", words=["DROP TABLE"]), by="alice", **where)
    await add_rule(h.client, p, dict(name="docs-ok", effect="approve", task_types=["docs"]), by="dana", **where)
    out = {}
    req, handle = await gate(h, p, DROP, "never")
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="No.", responder="alice"))
    await handle.result()
    out["gate-rule-ask"] = await handle.fetch_history()
    _, handle = await gate(h, p, ARTIFACT, "when_unsure")
    assert (await handle.result()).answered_by is AnsweredBy.rule
    out["gate-rule-answer"] = await handle.fetch_history()
    await pause(h.client, p, by="carol", **where)
    req, handle = await gate(h, p, ARTIFACT, "never")
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
    await handle.result()
    out["gate-paused"] = await handle.fetch_history()
    await resume(h.client, p, by="carol", **where)
    out["brain-control"] = await h.client.get_workflow_handle(c.brain_workflow_id(p)).fetch_history()
    _save(os.environ["VICAR_RECORD_HISTORIES"], out)
