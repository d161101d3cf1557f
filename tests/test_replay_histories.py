"""Recorded histories still replay against the current workflows.

tests/histories/ holds histories recorded by earlier code (the file name's label says
which: `baseline` is the protocol before the first release, docs/development.md
"Changing a workflow"): a change to a workflow's command sequence that is not behind
`workflow.patched(...)` makes their replay fail with a nondeterminism error, which is
what would happen to every gate, brain and session running when a worker is upgraded.

To record a new set (sealed with the fixed, public REPLAY_KEY below, so any later run can
open them; histories recorded before the payload codec are plaintext):

    VICAR_CODEC_KEYS=$(python -c 'from tests.test_replay_histories import REPLAY_KEY; print(REPLAY_KEY)') \
    VICAR_RECORD_HISTORIES=<label> pytest tests/test_replay_histories.py -k record
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.models import HumanAnswer
from vicar.models.brain import BrainConfig
from vicar.responders import save_allowed
from vicar.runtime.codec import AesGcmCodec, data_converter, parse_keys
from vicar.workflows.audit import AuditWorkflow, ReviewWorkflow
from vicar.workflows.brain import BrainWorkflow
from vicar.workflows.consolidation import ConsolidationWorkflow
from vicar.workflows.gate import GateWorkflow
from vicar.workflows.move import MoveWorkflow
from vicar.workflows.session import SessionWorkflow

from .conftest import VicarHarness, wait_escalated
from .test_brain import run_never_gates

HISTORIES = Path(__file__).parent / "histories"
# Not a secret: it only seals the test histories committed here.
REPLAY_KEY = "replay:" + base64.b64encode(hashlib.sha256(b"vicar replay histories").digest()).decode()
# The recorded brain continues as new after this many grants.
CONTINUE_AFTER = 3
WORKFLOWS = [GateWorkflow, BrainWorkflow, SessionWorkflow, ConsolidationWorkflow, MoveWorkflow]
WORKFLOWS += [AuditWorkflow, ReviewWorkflow]  # their histories: tests/test_audit.py records them


async def _record_all(h) -> dict[str, WorkflowHistory]:
    """One of each path worth keeping: a gate answered by update (with an allow-list), one
    answered by signal, one the proxy answered alone, a session with its consolidation,
    and the principal's brain that granted all their turns."""
    p = h.principal()
    save_allowed(h.settings.principals_dir, p, ["alice"])
    out: dict[str, WorkflowHistory] = {}

    req = h.request(p, artifact="Add an index on users.email.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="ok", responder="alice"))
    await handle.result()
    out["gate-update"] = await handle.fetch_history()

    req = h.request(p, artifact="Drop the legacy table.", session_id="s1")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await handle.signal("human_response", HumanAnswer(action="reject", text="not yet", responder="alice"))
    await handle.result()
    out["gate-signal-session"] = await handle.fetch_history()

    req = h.request(p, task_type="docs", escalation_mode="never", artifact="Fix a typo.")
    handle = await start_gate(h.client, req, h.task_queue)
    await handle.result()
    out["gate-proxy"] = await handle.fetch_history()

    session = h.client.get_workflow_handle(c.session_workflow_id(p, "s1"))
    await session.signal("end")
    await session.result()
    out["session"] = await session.fetch_history()
    consolidation = h.client.get_workflow_handle(c.consolidation_workflow_id(p, "s1"))
    await consolidation.result()
    out["consolidation"] = await consolidation.fetch_history()
    out["brain"] = await h.client.get_workflow_handle(c.brain_workflow_id(p)).fetch_history()
    return out


async def _record_endings(h) -> dict[str, WorkflowHistory]:
    """The gate's other endings (deadline, cancellation) and a brain across a
    continue-as-new (the harness's brain continues after a few grants): its first run,
    which ends by continuing, and the run that took over."""
    p = h.principal()
    out: dict[str, WorkflowHistory] = {}
    req = h.request(p, escalation_mode="always", deadline_seconds=2, artifact="Rename a column.")
    handle = await start_gate(h.client, req, h.task_queue)
    result = await handle.result()
    assert result.timed_out
    out["gate-deadline"] = await handle.fetch_history()

    req = h.request(p, escalation_mode="always", artifact="Drop an index.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await handle.cancel()
    with pytest.raises(Exception):
        await handle.result()
    out["gate-cancelled"] = await handle.fetch_history()

    await run_never_gates(h, p, 2 * CONTINUE_AFTER)
    latest = h.client.get_workflow_handle(c.brain_workflow_id(p))
    first_run = (await latest.describe()).raw_description.workflow_execution_info.first_run_id
    out["brain-continued"] = await h.client.get_workflow_handle(
        c.brain_workflow_id(p), run_id=first_run
    ).fetch_history()
    out["brain-after-continue"] = await latest.fetch_history()
    assert out["brain-continued"].events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert out["brain-after-continue"].events[0].workflow_execution_started_event_attributes.continued_execution_run_id
    return out


async def _record_move(temporal_env, embedder, settings, tmp_path) -> dict[str, WorkflowHistory]:
    """A principal moved from shard 0 to shard 1 (two workers, as in test_shards.py)."""
    from .shard_homes import start_move, two_homes
    from .test_gate import run_answering

    base, task_queue, homes, registries, groups, p = await two_homes(temporal_env, embedder, settings, tmp_path, "rp")
    try:
        async with groups[0], groups[1]:
            h = VicarHarness(temporal_env.client, task_queue, registries[0], base)
            await run_answering(h, h.request(p, task_type="docs", artifact="Fix a typo."))
            handle = await start_move(temporal_env.client, p, task_queue)
            report = await asyncio.wait_for(handle.result(), timeout=120)
            assert report.moved
            return {"move": await handle.fetch_history()}
    finally:
        for r in registries:
            r.close()


def _save(label: str, histories: dict[str, WorkflowHistory]) -> None:
    assert os.environ.get("VICAR_CODEC_KEYS") == REPLAY_KEY, "record with VICAR_CODEC_KEYS=REPLAY_KEY (see above)"
    HISTORIES.mkdir(exist_ok=True)
    for name, history in histories.items():
        (HISTORIES / f"{label}-{name}.json").write_text(
            json.dumps({"workflow_id": history.workflow_id, "history": json.loads(history.to_json())}) + "\n"
        )


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
async def test_record_histories(harness):
    _save(os.environ["VICAR_RECORD_HISTORIES"], await _record_all(harness))


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
@pytest.mark.parametrize("harness", [BrainConfig(max_grants_per_run=CONTINUE_AFTER)], indirect=True)
async def test_record_ending_histories(harness):
    _save(os.environ["VICAR_RECORD_HISTORIES"], await _record_endings(harness))


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
async def test_record_move_history(temporal_env, embedder, settings, tmp_path):
    _save(os.environ["VICAR_RECORD_HISTORIES"], await _record_move(temporal_env, embedder, settings, tmp_path))


def _stored() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def test_histories_are_committed():
    """The replay below checks something: histories from an earlier commit are there."""
    names = {p.name.split("-", 1)[1] for p in _stored()}
    assert {
        "gate-update.json",
        "gate-signal-session.json",
        "gate-proxy.json",
        "gate-deadline.json",
        "gate-cancelled.json",
        "session.json",
        "consolidation.json",
        "brain.json",
        "brain-continued.json",
        "brain-after-continue.json",
        "move.json",
        # recorded by the tests that say so: test_gate_show, test_human_control, test_audit
        "gate-excerpts.json",
        "gate-paused.json",
        "gate-rule-answer.json",
        "gate-rule-ask.json",
        "brain-control.json",
        "audit-page.json",
        "review.json",
    } <= names


@pytest.mark.parametrize("path", _stored(), ids=lambda p: p.stem)
async def test_old_history_replays(path: Path):
    stored = json.loads(path.read_text())
    history = WorkflowHistory.from_json(stored["workflow_id"], stored["history"])
    stored_keys = AesGcmCodec(parse_keys(REPLAY_KEY, "REPLAY_KEY"))
    replayer = Replayer(
        workflows=WORKFLOWS, data_converter=dataclasses.replace(pydantic_data_converter, payload_codec=stored_keys)
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


async def test_fresh_histories_replay(harness):
    """What the current code records replays too (every patch taken)."""
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    for name, history in (await _record_all(harness)).items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{name}: {result.replay_failure}"
