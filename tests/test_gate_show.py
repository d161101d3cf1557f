"""What a person sees of a gate (issue 28 item 1): `vicar gate show`, `GateHandle.view()`,
`vicar escalations` with the artifact, the agent and the deadline, a 100-column terminal,
and several gates answered in one command. Real Temporal dev server, real CLI."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from pathlib import Path

import pytest

from vicar import contracts as c
from vicar.client import get_gate
from vicar.client.gates import start_gate
from vicar.errors import Conflict, NotFound
from vicar.models import GateStatus, HumanAnswer
from vicar.settings import CalibrationParams, Settings

from .conftest import LOOSE_AUTONOMY, record_answer, wait_escalated, wait_for

HOSTILE = "Fix the typo in the README; also DROP TABLE users;"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The worker may read artifact files under tmp_path/art."""
    (tmp_path / "art").mkdir()
    return Settings(
        data_dir=tmp_path / "vicar",
        calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY),
        artifact_roots=[tmp_path / "art"],
    )


def _env(h) -> dict[str, str]:
    env = dict(os.environ)
    env["TEMPORAL_ADDRESS"] = h.client.service_client.config.target_host
    env["VICAR_DATA_DIR"] = str(h.settings.data_dir)
    env.pop("COLUMNS", None)
    return env


async def vicar(h, *args: str) -> subprocess.CompletedProcess:
    """The real `vicar` command in its own process, its stdout a pipe."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "vicar.cli", *args],
        env=_env(h),
        capture_output=True,
        text=True,
        timeout=60,
    )


def vicar_in_terminal(h, columns: int, *args: str) -> str:
    """The real `vicar` command on a pseudo-terminal `columns` wide: what a person sees."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vicar.cli", *args], stdin=slave, stdout=slave, stderr=slave, env=_env(h)
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command ended and the terminal closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.kill() if proc.poll() is None else None
        proc.wait(10)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode("utf-8", "replace")).replace("\r\n", "\n")


async def _escalated_gate(h, p: str, **kw):
    req = h.request(p, escalation_mode="always", **kw)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    return req, handle


def _teach(h, p: str) -> None:
    """Three corrections in the principal's memory, so the proxy has words of theirs."""
    memory = h.registry.get(p)
    for i in range(1, 4):
        past = h.request(p, task_type="docs", state="WORK_ASSERT", artifact=f"Fix typo number {i} in the README.")
        record_answer(memory, past, i, "correct", "Please run the docs build before sending this.", predicted="correct")


async def test_a_waiting_gate_shows_what_is_approved(harness, tmp_path):
    h = harness
    p = h.principal()
    _teach(h, p)
    notes = tmp_path / "art" / "notes.md"
    notes.write_text("# Release notes\n\nThe migration drops the legacy users table.\n")
    req, handle = await _escalated_gate(
        h,
        p,
        task_type="docs",
        state="WORK_ASSERT",
        artifact=HOSTILE,
        question="Merge this docs-only change?",
        actor_message="Only the README changed, promise.",
        upstream_agent="writer-bot",
        deadline_seconds=3600,
        artifact_paths=[str(notes)],
    )

    view = await (await get_gate(h.client, req.gate_id)).view()
    assert view.status == "escalated" and view.workflow_status == "running" and view.details_from == "query"
    assert view.artifact_text == HOSTILE and view.actor_message == req.actor_message
    assert view.upstream_agent == "writer-bot" and view.deadline is not None
    assert view.deadline > view.started_at and view.result is None
    [f] = view.artifact_files
    assert f.path == str(notes) and "drops the legacy users table" in f.excerpt and not f.truncated
    assert "docs build" in view.proxy_text and view.proxy_action == "correct"  # their own words, learned
    assert view.calibration_guard
    # The evidence: the person's own past sentence, with the gate it was said on.
    assert any("docs build" in i.text and i.action == "correct" and i.gate_id for i in view.prereview)
    assert view.prereview_dates == {}  # the taught answers were stored directly: no gate of theirs to date them

    shown = await vicar(h, "gate", "show", req.gate_id)
    assert shown.returncode == 0, shown.stderr
    for expected in (HOSTILE, req.actor_message, "writer-bot", "drops the legacy users table", "docs build"):
        assert expected in shown.stdout, expected
    assert "deadline" in shown.stdout.lower() and "Their own past words" in shown.stdout
    as_json = await vicar(h, "gate", "show", req.gate_id, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["artifact_files"][0]["excerpt"] == f.excerpt
    pending = await vicar(h, "gate", "result", req.gate_id)
    assert pending.returncode == 8  # result still waits; show did not

    # `vicar escalations` shows the artifact, the agent and the deadline.
    listed = await vicar(h, "escalations", "--principal", p, "-o", "json")
    [row] = json.loads(listed.stdout)
    assert row["artifact_excerpt"] == HOSTILE and row["upstream_agent"] == "writer-bot" and row["deadline"]
    assert "docs build" in row["proxy_text"] and "docs build" in row["prereview"][0]["text"]
    table = await vicar(h, "escalations", "--principal", p)
    assert "DROP TABLE users" in table.stdout and "writer-bot" in table.stdout

    # The Temporal UI's details while it waits: the artifact, the agent, the deadline too.
    from temporalio.api.sdk.v1 import WorkflowMetadata

    ui = (await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)).current_details
    assert HOSTILE in ui and "writer-bot" in ui and "Deadline" in ui and "docs build" in ui
    static = await (await handle.describe()).static_details()
    assert HOSTILE in static and "writer-bot" in static and f"vicar gate show {req.gate_id}" in static

    # A 100-column terminal: the guard and the state are whole.
    screen = await asyncio.to_thread(vicar_in_terminal, h, 100, "escalations", "--principal", p)
    assert "WORK_ASSERT" in screen, screen
    assert view.calibration_guard in screen, screen
    assert max(len(line) for line in screen.splitlines()) <= 100

    answered = await vicar(
        h, "answer", req.gate_id, "approve", "Fine, the release notes read well.", "--responder", "bo"
    )
    assert answered.returncode == 0, answered.stderr
    result = await handle.result()
    done = json.loads((await vicar(h, "gate", "show", req.gate_id, "-o", "json")).stdout)
    assert done["workflow_status"] == "completed" and done["status"] == "done"
    assert done["result"]["action"] == result.action.value == "approve" and done["result"]["responder"] == "bo"
    finished = await vicar(h, "gate", "show", req.gate_id)
    assert "approve" in finished.stdout and "bo" in finished.stdout
    # The next gate's evidence includes bo's words on this one, dated by this gate's close.
    nxt, nxt_handle = await _escalated_gate(
        h, p, task_type="docs", state="WORK_ASSERT", artifact="Fix a typo in the README."
    )
    later = await (await get_gate(h.client, nxt.gate_id)).view()
    [item] = [i for i in later.prereview if i.gate_id == req.gate_id]
    assert "release notes read well" in item.text and item.action == "approve"
    assert later.prereview_dates[req.gate_id] == (await handle.describe()).close_time
    await nxt_handle.terminate(reason="test: done")
    # The excerpts step (patch gate-artifact-excerpts) replays as it ran.
    from temporalio.worker import Replayer

    from vicar.workflows.gate import GateWorkflow

    await Replayer(workflows=[GateWorkflow], data_converter=h.client.data_converter).replay_workflow(
        await handle.fetch_history()
    )


DIFF = """diff --git a/docs/install.md b/docs/install.md
index 3b18e51..a9c2f04 100644
--- a/docs/install.md
+++ b/docs/install.md
@@ -1,4 +1,4 @@
 # Install
-Run pip install vicar.
+Run pip install vicar; also DROP TABLE users;
 Then start a worker.
"""


async def test_a_diff_excerpt_shows_the_change_not_the_header(harness):
    """A `docs` diff whose headers alone fill a line: every one-line surface shows the
    changed lines (the DROP TABLE), not `diff --git a/... index ... @@`."""
    from vicar.client.gates import list_escalations
    from vicar.contracts import Notice
    from vicar.models.chat import slack_message

    h = harness
    p = h.principal()
    req, handle = await _escalated_gate(
        h, p, task_type="docs", state="WORK_ASSERT", artifact=DIFF, question="Merge this docs-only change?"
    )
    expected = "docs/install.md: -Run pip install vicar. +Run pip install vicar; also DROP TABLE users;"
    listed = await vicar(h, "escalations", "--principal", p, "-o", "json")
    [row] = json.loads(listed.stdout)
    assert row["artifact_excerpt"] == expected, row["artifact_excerpt"]
    table = await vicar(h, "escalations", "--principal", p)
    # The excerpt may wrap inside its column, between "DROP" and "TABLE".
    words = table.stdout.split()
    assert "DROP" in words and "users;" in words and words.index("users;") - words.index("DROP") < 40, table.stdout
    [memo] = await list_escalations(h.client, p)  # what the inbox's list reads
    assert memo.artifact_excerpt == expected
    notice = Notice(event="escalated", event_id=f"{memo.workflow_id}/escalated", gate=memo)
    chat = json.dumps(slack_message(notice, "http://127.0.0.1:1"))
    assert "DROP TABLE users" in chat and "index 3b18e51" not in chat
    static = await (await handle.describe()).static_details()
    assert expected in static
    await handle.terminate(reason="test: done")


async def test_a_gate_shows_the_persons_earlier_verdicts_on_its_lineage(harness):
    """gate show, the view and the inbox's page list what the person answered on this
    artifact's earlier revisions (the lineage's verdicts the proxy read), not only its guess."""
    h = harness
    p = h.principal()
    first, first_handle = await _escalated_gate(
        h, p, task_type="docs", artifact="Fix the install guide.", lineage="docs-install", revision="v1"
    )
    await first_handle.execute_update(
        c.RESPOND_UPDATE, HumanAnswer(action="correct", text="Say which pip version.", responder="bo")
    )
    await first_handle.result()
    second, second_handle = await _escalated_gate(
        h, p, task_type="docs", artifact="Fix the install guide (pip 24).", lineage="docs-install", revision="v2"
    )
    view = await (await get_gate(h.client, second.gate_id)).view()
    [earlier] = view.lineage_verdicts
    assert earlier.action == "correct" and "which pip version" in earlier.response and earlier.revision == "v1"
    shown = await vicar(h, "gate", "show", second.gate_id)
    assert "earlier verdicts on this lineage" in shown.stdout and "which pip version" in shown.stdout
    from vicar.inbox.cards import card
    from vicar.inbox.gate_data import GatePage
    from vicar.inbox.web import Inbox

    page = (
        Inbox(settings=h.settings)
        .templates.get_template("gate.html")
        .render(g=GatePage(v=view), c=card(view, None, excerpt="", on_page=True), csrf="t", seen="s", undo_seconds=10)
    )
    assert "earlier verdicts on this lineage" in page and "Say which pip version." in page
    await second_handle.terminate(reason="test: done")


async def test_several_gates_answered_in_one_command(harness):
    h = harness
    p = h.principal()
    gates = [await _escalated_gate(h, p, artifact=f"Plan {i}.") for i in range(3)]
    ids = ",".join(req.gate_id for req, _ in gates)
    missing = f"g-missing-{uuid.uuid4().hex[:6]}"
    done = await vicar(h, "answer", f"{ids},{missing}", "approve", "All fine.", "--responder", "bo", "-o", "json")
    rows = json.loads(done.stdout)
    assert done.returncode == NotFound.exit_code, done.stderr  # one gate was not found: its code; the others answered
    assert [r["gate_id"] for r in rows] == [req.gate_id for req, _ in gates] + [missing]
    assert [r["ok"] for r in rows] == [True, True, True, False] and rows[3]["exit_code"] == NotFound.exit_code
    for _, handle in gates:
        result = await handle.result()
        assert result.action.value == "approve" and result.responder == "bo" and result.text == "All fine."
    again = await vicar(h, "answer", ids, "reject", "--responder", "bo")
    assert again.returncode == Conflict.exit_code, again.stderr
    assert again.stdout.count("already answered") == 3, again.stdout


async def test_unknown_gate_is_one_line_and_its_exit_code(harness):
    shown = await vicar(harness, "gate", "show", f"g-nope-{uuid.uuid4().hex[:6]}")
    assert shown.returncode == NotFound.exit_code and shown.stdout == ""
    assert len(shown.stderr.strip().splitlines()) == 1 and "no gate" in shown.stderr


async def test_a_gate_shows_from_its_memo_with_no_worker(temporal_env, embedder, settings):
    """A waiting gate whose worker is down is still shown: the request from history, the
    proxy's guess from the memo the gate wrote when it escalated."""
    from vicar.client.view import gate_view
    from vicar.memory.registry import MemoryRegistry
    from vicar.worker import build_worker

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    p = f"p-{uuid.uuid4().hex[:8]}"
    from vicar.models import GateRequest

    req = GateRequest(
        principal=p,
        gate_id=f"g-{uuid.uuid4().hex[:8]}",
        state="PLAN_ASSERT",
        task_type="docs",
        question="Ship it?",
        artifact_text=HOSTILE,
        upstream_agent="writer-bot",
    )
    try:
        async with worker:
            handle = await start_gate(temporal_env.client, req, task_queue)
            await wait_escalated(temporal_env.client, req.gate_id)
    finally:
        registry.close()
    view = await gate_view(temporal_env.client, req.gate_id, query_seconds=1)
    assert view.details_from == "memo" and view.status == GateStatus.escalated.value
    assert view.artifact_text == HOSTILE and view.upstream_agent == "writer-bot" and "no memory" in view.proxy_text
    await handle.terminate(reason="test: done")

    async def ended():
        v = await gate_view(temporal_env.client, req.gate_id, query_seconds=1)
        return v if v.workflow_status == "terminated" else None

    assert (await wait_for(ended)).ended


@pytest.mark.skipif(not os.environ.get("VICAR_RECORD_HISTORIES"), reason="records only when asked")
async def test_record_excerpts_history(harness, tmp_path):
    """tests/histories/<label>-gate-excerpts.json (tests/test_replay_histories.py replays it):
    an escalated gate that kept its file's excerpt. Recorded as that module says."""
    from .test_replay_histories import _save

    plan = tmp_path / "art" / "plan.md"
    plan.write_text("# Plan\n\nAdd an index on users.email.\n")
    req, handle = await _escalated_gate(harness, harness.principal(), artifact_paths=[str(plan)], deadline_seconds=3600)
    await handle.execute_update(c.RESPOND_UPDATE, HumanAnswer(action="approve", text="ok", responder="alice"))
    await handle.result()
    _save(os.environ["VICAR_RECORD_HISTORIES"], {"gate-excerpts": await handle.fetch_history()})


def test_a_diff_excerpt_counts_hunks_not_markers():
    """A removed line that reads `-- x` is a change, a second file's headers are not; a
    text that only looks like a header stays as it is."""
    from vicar.models.view import excerpt_line

    two = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +0,0 @@\n--- keep users\n-DROP TABLE users;\n"
    two += "--- a/r\n+++ b/r\n@@ -1 +1 @@\n-x\n+y\n"
    assert excerpt_line(two) == "q.sql: --- keep users -DROP TABLE users; r: -x +y"
    gone = "diff --git a/old.md b/old.md\ndeleted file mode 100644\n--- a/old.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    assert excerpt_line(gone) == "old.md: -bye"
    assert excerpt_line("--- not a diff\n+++ either") == "--- not a diff +++ either"
