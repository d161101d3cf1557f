"""Teams on a real server: what crosses between a team's principals is counts and draws only;
a new member is answered alone on the team's pooled bound once their own answers back the
kind; their own test takes the team's threshold away where their answers refute it."""

from __future__ import annotations

import json
import uuid

import pytest

from vicar.contracts import gate_workflow_id
from vicar.models import AnsweredBy, AutonomyRule
from vicar.proxy.autonomy.team import own_error_above, team_rule
from vicar.proxy.team_store import counts_for, set_team, share, team_draws
from vicar.settings import Settings

from .test_gate import run_answering
from .test_kind_autonomy import command_gate


async def opened_payloads(client, history) -> str:
    """Every payload of a workflow's history, opened with the deployment's codec: what a
    reader of the history with the key would see."""
    from google.protobuf.message import Message
    from temporalio.api.common.v1 import Payload

    found: list[Payload] = []

    def walk(msg: Message) -> None:
        for field, value in msg.ListFields():
            if field.message_type is None:
                continue
            if isinstance(value, Message):
                items = [value]
            elif callable(getattr(value, "values", None)):
                items = list(value.values())  # a map field
            else:
                items = list(value)  # a repeated field
            for item in items:
                if isinstance(item, Payload):
                    found.append(item)
                elif isinstance(item, Message):
                    walk(item)

    for event in history.events:
        walk(event)
    codec = client.data_converter.payload_codec
    opened = await codec.decode(found) if codec else found
    return "\n".join(p.data.decode("utf-8", "replace") for p in opened)


@pytest.fixture
def settings(tmp_path):
    """The shipped autonomy rule (5% target, 5% audits), not the suite's loose one."""
    return Settings(data_dir=tmp_path / "vicar")


async def test_a_new_member_is_answered_alone_on_the_teams_bound_and_sees_nothing_of_theirs(harness):
    h = harness
    data_dir = h.settings.data_dir
    alice, bob = h.principal(), h.principal()
    set_team(data_dir, alice, "platform")
    set_team(data_dir, bob, "platform")
    secret = f"alice-only-{uuid.uuid4().hex[:8]}"
    # Alice answers her routine commands long enough that the team's draws prove a threshold.
    for i in range(130):
        lineage, text = [("bash:git status", "git status"), ("bash:ls", "ls -la")][i % 2]
        req = command_gate(h, alice, lineage, f"{text} {secret}")
        await run_answering(h, req, text=f"fine {secret}")
    assert len(team_draws(data_dir, "platform")) >= 130
    # Bob: three approvals of `git status` of his own, then the next is answered alone
    # under the team's rule (his own answers could prove nothing yet).
    results = []
    for i in range(6):
        results.append(await run_answering(h, command_gate(h, bob, "bash:git status", f"git status -{i}"), text="ok"))
        if results[-1].answered_by is AnsweredBy.proxy:
            break
    by_person = sum(r.answered_by is AnsweredBy.human for r in results)
    assert results[-1].answered_by is AnsweredBy.proxy, [r.calibration_note for r in results]
    assert by_person <= 5
    assert "team" in results[-1].calibration_note, results[-1].calibration_note
    # Nothing of Alice's reaches Bob's proxy: her words, artifacts and memory ids are not in
    # his gates' histories, his memory, or what his proxy read of the team.
    counts = counts_for(data_dir, bob)
    assert counts is not None and secret not in json.dumps(counts.model_dump())
    alice_chunks = {c.id for c in h.registry.get(alice).store.chunks(with_traces=False)}
    bob_mem = h.registry.get(bob)
    assert not alice_chunks & {c.id for c in bob_mem.store.chunks(with_traces=False)}
    for r in results:
        history = await h.client.get_workflow_handle(gate_workflow_id(r.gate_id)).fetch_history()
        events = await opened_payloads(h.client, history)
        assert events and "git status -" in events  # the history was read, opened
        assert secret not in events and not any(cid in events for cid in alice_chunks)
        details = r.model_dump_json()
        assert secret not in details


def test_the_teams_threshold_yields_to_the_persons_own_refutation(tmp_path) -> None:
    """Team draws spotless above 0.9 prove a threshold; a member whose own labelled answers
    above it are mostly wrong has it taken away, with the reason; one who is right keeps it."""
    from datetime import UTC, datetime

    from vicar.memory.store import RecordStore
    from vicar.models import Action, Calibration, GateRequest, OutcomeRecord, PassResult
    from vicar.proxy.outcome_log import OutcomeEntry, log_outcome
    from vicar.proxy.outcomes import autonomy_pair

    data_dir = tmp_path / "vicar"
    (data_dir / "principals" / "carol").mkdir(parents=True)
    set_team(data_dir, "carol", "ops")
    set_team(data_dir, "dave", "ops")

    def rec(principal: str, i: int, right: bool) -> OutcomeRecord:
        req = GateRequest(principal=principal, gate_id=f"g{i}", state="PLAN_ASSERT", task_type="docs", question="ok?")
        post = PassResult(prose="ok", confidence=0.97, action=Action.approve)
        return OutcomeRecord(
            request=req,
            n=i,
            workflow_id=f"w-{principal}-{i}",
            action=Action.approve if right else Action.reject,
            response_text="x",
            answered_by=AnsweredBy.human,
            posterior=post,
            calibration=Calibration(confidence=0.97, guard="unproven"),
            at=datetime.now(UTC),
        )

    for i in range(200):
        r = rec("dave", i, True)
        share(data_dir, "ops", r, (0.97, False, 1.0, True))
    carol_dir = data_dir / "principals" / "carol"
    store = RecordStore(carol_dir / "memory.db")
    rule = team_rule(store, carol_dir, "gate", 0.05, 0.05, 0.05, True)
    assert isinstance(rule, AutonomyRule) and rule.threshold is not None and rule.scope == "team ops"
    # Carol's own answers above it: wrong 6 times in 10.
    for i in range(10):
        r = rec("carol", i, i % 5 == 0 or i % 5 == 1 and i > 5)
        ev = autonomy_pair(r)
        log_outcome(
            store,
            OutcomeEntry(
                workflow_id=r.workflow_id,
                state="PLAN_ASSERT",
                task_type="docs",
                answered_by="human",
                action=r.action.value,
                at=None,
                record=r.model_dump_json(),
                context_key="PLAN_ASSERT|docs",
                update=lambda stored: stored or "{}",
                evidence=ev,
            ),
        )
    assert own_error_above(store, "gate", rule.threshold, 0.05, 0.05)[0] > 0
    refuted = team_rule(store, carol_dir, "gate", 0.05, 0.05, 0.05, True)
    assert refuted is not None and refuted.threshold is None and "your own answers" in (refuted.withdrawn or "")
    store.close()
