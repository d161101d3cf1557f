"""Recorded histories still replay against the current workflows.

tests/histories/ holds histories recorded by earlier code (the file name says which
commit): a change to a workflow's command sequence that is not behind
`workflow.patched(...)` makes their replay fail with a nondeterminism error, which is
what would happen to every gate, brain and session running when a worker is upgraded.

To record a new set (sealed with the fixed, public REPLAY_KEY below, so any later run can
open them; histories recorded before the payload codec are plaintext):

    VICAR_CODEC_KEYS=$(python -c 'from tests.test_replay_histories import REPLAY_KEY; print(REPLAY_KEY)') \
    VICAR_RECORD_HISTORIES=<label> pytest tests/test_replay_histories.py -k record
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from vicar import contracts as c
from temporalio.contrib.pydantic import pydantic_data_converter

from vicar.codec import AesGcmCodec, data_converter, parse_keys
from vicar.gates import answer_gate, start_gate
from vicar.models import HumanAnswer
from vicar.responders import save_allowed
from vicar.workflows.brain import BrainWorkflow
from vicar.workflows.consolidation import ConsolidationWorkflow
from vicar.workflows.gate import GateWorkflow
from vicar.workflows.move import MoveWorkflow
from vicar.workflows.session import SessionWorkflow

from .conftest import wait_escalated

HISTORIES = Path(__file__).parent / "histories"
# Not a secret: it only seals the test histories committed here.
REPLAY_KEY = "replay:" + base64.b64encode(hashlib.sha256(b"vicar replay histories").digest()).decode()
WORKFLOWS = [GateWorkflow, BrainWorkflow, SessionWorkflow, ConsolidationWorkflow, MoveWorkflow]


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


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
async def test_record_histories(harness):
    label = os.environ["VICAR_RECORD_HISTORIES"]
    assert os.environ.get("VICAR_CODEC_KEYS") == REPLAY_KEY, "record with VICAR_CODEC_KEYS=REPLAY_KEY (see above)"
    HISTORIES.mkdir(exist_ok=True)
    for name, history in (await _record_all(harness)).items():
        (HISTORIES / f"{label}-{name}.json").write_text(
            json.dumps({"workflow_id": history.workflow_id, "history": json.loads(history.to_json())}) + "\n")


def _stored() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def test_histories_are_committed():
    """The replay below checks something: histories from an earlier commit are there."""
    names = {p.name.split("-", 1)[1] for p in _stored()}
    assert {"gate-update.json", "gate-signal-session.json", "gate-proxy.json", "session.json",
            "consolidation.json", "brain.json"} <= names


@pytest.mark.parametrize("path", _stored(), ids=lambda p: p.stem)
async def test_old_history_replays(path: Path):
    stored = json.loads(path.read_text())
    history = WorkflowHistory.from_json(stored["workflow_id"], stored["history"])
    stored_keys = AesGcmCodec(parse_keys(REPLAY_KEY, "REPLAY_KEY"))
    replayer = Replayer(workflows=WORKFLOWS,
                        data_converter=dataclasses.replace(pydantic_data_converter, payload_codec=stored_keys))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


async def test_fresh_histories_replay(harness):
    """What the current code records replays too (every patch taken)."""
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    for name, history in (await _record_all(harness)).items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{name}: {result.replay_failure}"
