"""Hostile text is shown as text, and every failure is one line with a distinct exit code:
markup and terminal control sequences in gates, racing answers, stuck gates, bad files,
broken stores."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest
import typer
from rich.console import Console
from temporalio import workflow
from temporalio.worker import Worker
from typer.testing import CliRunner

from vicar import cli
from vicar.cli import app
from vicar.client.gates import answer_gate, start_gate
from vicar.demo import DemoSummary, render_summary
from vicar.errors import UNEXPECTED, BrokenStore, Conflict, InvalidInput, NotFound, NotResponding
from vicar.models import GateResult, HumanAnswer

from .conftest import wait_escalated, wait_for
from .test_bad_input import cli_env, error_line, gate_exists  # noqa: F401  (cli_env is a fixture)

runner = CliRunner()

MARKUP = ("[/bold]", "[conceal]secret[/conceal]", "[link=http://x]y[/link]")
CONTROLS = (
    "\x1b[31mred\x1b[0m",
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "over\rwrite",
    "back\x08space",
)
HOSTILE = " ".join(MARKUP + CONTROLS)
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_shown_as_text(output: str, *literal: str) -> None:
    assert not RAW_CONTROL.search(output), repr(output)  # no ESC, \r, backspace reaches the terminal
    for part in literal:
        assert part in output, (part, output)


async def invoke(*args: str, input=None):
    return await asyncio.to_thread(runner.invoke, app, list(args), input=input)


async def test_hostile_question_is_listed_as_text(cli_env, harness, monkeypatch):
    h = harness
    p = h.principal()
    req = h.request(p, question=f"Approve? {HOSTILE}", task_type="docs[/i]\x1b[2J")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    monkeypatch.setattr(cli.console, "width", 2000)  # one table row per line: the literals stay whole
    result = await invoke("escalations", "--principal", p)
    assert result.exit_code == 0, result.output
    assert_shown_as_text(
        result.output,
        req.gate_id,
        *MARKUP,
        "\\x1b[31mred\\x1b[0m",
        "\\x1b]8;;http://evil.example\\x1b\\click",
        "over\\rwrite",
        "back\\x08space",
        "docs[/i]\\x1b[2j",
    )
    await handle.terminate()


async def test_error_lines_embedding_hostile_ids_are_text(cli_env, temporal_env):
    gid = "[/bold][conceal]x[/conceal]\x1b]8;;http://e\x07id\r"
    result = await invoke("answer", gid, "approve")
    assert result.exit_code == NotFound.exit_code
    line = error_line(result)
    assert_shown_as_text(result.output, "[/bold][conceal]x[/conceal]")
    assert "\\x1b]8;;http://e\\x07id\\r" in line
    # A session id is not validated: the not-found line shows it as text.
    result = await invoke("session", "show", "alice", "[/red]\x1b[5m\n2nd line")
    assert result.exit_code == NotFound.exit_code
    assert_shown_as_text(error_line(result), "[/red]\\x1b[5m\\n2nd line")  # still one line
    # Validation refuses a hostile principal, and says so as text.
    result = await invoke("escalations", "--principal", "[/bold]\x1b[31m")
    assert result.exit_code == InvalidInput.exit_code
    assert_shown_as_text(error_line(result), "invalid principal '[/bold]\\x1b[31m'")
    # Undecodable bytes in an argument (Python keeps them as lone surrogates).
    result = await invoke("answer", "g\udcff", "approve")
    assert result.exit_code == InvalidInput.exit_code
    assert "not valid UTF-8 text" in error_line(result) and "\\udcff" in result.output


def test_demo_summary_renders_hostile_text_as_text():
    r = GateResult(
        gate_id="g",
        principal="p",
        state="PLAN_ASSERT",
        task_type=f"t {HOSTILE}",
        action="approve",
        text="ok",
        confidence=0.5,
        prior_confidence=0.4,
        calibration_guard="[/x]\x1b[1m",
        escalated=True,
        answered_by="human",
        n=1,
    )
    out = io.StringIO()
    render_summary(
        DemoSummary(results=[r], seconds=1.0, memory_chunks=1, memory_human=1),
        Console(file=out, width=2000, emoji=False),
        "[/bold]\x1b[31m",
        None,
    )
    assert_shown_as_text(out.getvalue(), *MARKUP, "[/x]\\x1b[1m", "principal [/bold]\\x1b[31m", "over\\rwrite")


async def test_two_simultaneous_answers_one_wins_the_other_gets_a_conflict(cli_env, harness):
    h = harness
    p = h.principal()
    # Through the client, sent together.
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    outcomes = await asyncio.gather(
        answer_gate(h.client, req.gate_id, HumanAnswer(action="approve", text="first", responder="ann")),
        answer_gate(h.client, req.gate_id, HumanAnswer(action="reject", text="second", responder="bob")),
        return_exceptions=True,
    )
    won = [o for o in outcomes if isinstance(o, str)]
    lost = [o for o in outcomes if not isinstance(o, str)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], Conflict) and "already answered" in str(lost[0])
    result = await handle.result()
    assert result.action.value == ("approve" if "approve" in won[0] else "reject")

    # Through two `vicar answer` processes at once.
    req = h.request(p)
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vicar.cli",
            "answer",
            req.gate_id,
            action,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for action in ("approve", "reject")
    ]
    outs = [await p.communicate() for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, Conflict.exit_code], outs
    loser = next(out for p, out in zip(procs, outs) if p.returncode)
    lines = (loser[0] + loser[1]).decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: gate ") and "already answered" in lines[0], lines
    await handle.result()


# A command run as `vicar` is: an atexit hook tells whether the interpreter's teardown ran.
AS_THE_COMMAND = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('torn down', file=sys.stderr, flush=True))\n"
    "from vicar.cli import main\n"
    "sys.argv = ['vicar', *sys.argv[1:]]\n"
    "main()\n"
)


async def test_a_command_that_used_temporal_skips_the_teardown_that_can_abort_it(cli_env, harness):
    """The SDK's native threads can abort a finishing client process during the
    interpreter's teardown (a `vicar answer` that had printed "accepted" exited -6):
    such a command ends with its exit code and flushed output, and no teardown."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", AS_THE_COMMAND, *args], env=env, capture_output=True, text=True, timeout=120
        )

    listed = await asyncio.to_thread(run, "escalations", "--principal", harness.principal(), "-o", "json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, []), listed.stderr
    assert "torn down" not in listed.stderr
    missing = await asyncio.to_thread(run, "answer", f"g-{uuid.uuid4().hex[:8]}", "approve")
    assert missing.returncode == NotFound.exit_code and missing.stderr.startswith("error: ")
    assert "torn down" not in missing.stderr
    # A reader that went away (`vicar escalations | head`): no traceback either (click
    # pacifies the broken pipe before the command's end flushes).
    gone = subprocess.Popen(
        [sys.executable, "-c", AS_THE_COMMAND, "escalations", "-o", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    gone.stdout.close()
    _, stderr = await asyncio.to_thread(gone.communicate, timeout=120)
    assert "Traceback" not in stderr and "torn down" not in stderr, stderr
    # A usage error (the CLI loads the bridge with the contracts' activity options, since
    # the renovation put them beside the names): its exit code and usage, nothing else.
    bad = await asyncio.to_thread(run, "gate", "start", "--file", "/nonexistent/gate.json")
    assert bad.returncode == 2 and "Usage:" in bad.stderr and "Traceback" not in bad.stderr
    assert "torn down" not in bad.stderr


async def test_gate_file_with_invalid_utf8_is_one_line(cli_env, temporal_env, tmp_path):
    gid = f"g-{uuid.uuid4().hex[:8]}"
    head = json.dumps(
        {"principal": "alice", "gate_id": gid, "state": "PLAN_ASSERT", "task_type": "docs", "question": "caf"}
    ).encode()[:-2]
    raw = head + b'\xe9"}'
    spec = tmp_path / "gate.json"
    spec.write_bytes(raw)
    result = await invoke("gate", "start", str(spec))
    assert result.exit_code == InvalidInput.exit_code
    assert f"{spec} is not valid UTF-8 (byte {len(head)}:" in error_line(result)
    result = await invoke("gate", "start", "-", input=raw)
    assert result.exit_code == InvalidInput.exit_code
    assert f"- is not valid UTF-8 (byte {len(head)}:" in error_line(result)
    assert not await gate_exists(temporal_env.client, gid)


@workflow.defn(name="VicarGate", sandboxed=False)
class BrokenGate:
    """A gate workflow whose every workflow task fails, like a bad deploy."""

    @workflow.run
    async def run(self, req: dict) -> None:
        raise RuntimeError("broken on purpose")


async def test_answer_to_a_gate_whose_workflow_task_fails_is_one_line(cli_env, harness):
    h = harness
    queue = f"broken-{uuid.uuid4().hex[:6]}"
    async with Worker(h.client, task_queue=queue, workflows=[BrokenGate]):
        req = h.request(h.principal())
        handle = await start_gate(h.client, req, queue)

        async def failing():
            return (await handle.describe()).raw_description.pending_workflow_task.attempt > 1

        await wait_for(failing)
        result = await asyncio.wait_for(invoke("answer", req.gate_id, "approve", "--timeout", "2"), 60)
        assert result.exit_code == NotResponding.exit_code
        line = error_line(result)
        assert (
            "cannot take an answer now: its workflow task keeps failing (attempt " in line
            and "broken on purpose" in line
        )
        await handle.terminate()


async def test_answer_to_a_gate_no_worker_runs_ends_within_the_timeout(cli_env, harness):
    h = harness
    queue = f"nobody-{uuid.uuid4().hex[:6]}"
    req = h.request(h.principal())
    handle = await start_gate(h.client, req, queue)
    start = time.monotonic()
    result = await asyncio.wait_for(invoke("answer", req.gate_id, "approve", "--timeout", "2"), 60)
    assert time.monotonic() - start < 45  # bounded by --timeout, not by the server
    assert result.exit_code == NotResponding.exit_code
    line = error_line(result)
    assert "did not take the answer within 2 s" in line and f"no worker polls its task queue '{queue}'" in line
    await handle.terminate()


@pytest.mark.parametrize("command", [["memory", "stats"], ["health"]])
def test_junk_memory_db_is_one_line(command, monkeypatch, settings):
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    path = settings.principals_dir / "bob" / "memory.db"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not SQLite \x00\xff" * 500)
    result = runner.invoke(app, [*command, "bob"])
    assert result.exit_code == BrokenStore.exit_code
    line = error_line(result)
    assert str(path) in line and "run `vicar memory check bob`" in line


async def test_not_found_and_long_input_are_one_line(cli_env):
    assert (await invoke("answer", "no-such-gate", "approve")).exit_code == NotFound.exit_code
    result = await invoke("answer", "g" * 5000, "approve")
    assert result.exit_code == NotFound.exit_code
    assert len(error_line(result)) <= cli.MAX_ERROR_CHARS + len("error: ")  # the id is clipped


def test_unexpected_errors_are_one_line_unless_debugging(monkeypatch):
    probe = typer.Typer()

    @probe.command()
    @cli.friendly
    def read(path: str) -> None:
        open(path).read()  # an OSError nothing turns into a VicarError: a bug, shown as one line

    result = runner.invoke(probe, ["/"])
    assert result.exit_code == UNEXPECTED
    assert "unexpected IsADirectoryError" in error_line(result) and "VICAR_DEBUG=1" in result.output
    monkeypatch.setenv("VICAR_DEBUG", "1")  # developers get the exception and its traceback
    result = runner.invoke(probe, ["/"])
    assert isinstance(result.exception, IsADirectoryError) and "error:" not in result.output
    # User errors stay one line even then.
    result = runner.invoke(app, ["gate", "start", "/nonexistent/gate.json"])
    assert result.exit_code == InvalidInput.exit_code and "cannot read /nonexistent/gate.json" in error_line(result)
