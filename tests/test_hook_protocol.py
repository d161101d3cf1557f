"""The hook's protocol without a server: the documented inputs (tests/fixtures/claude_code/)
read and turned into gates, bad input refused in one line, and every failure of the real
command answering `ask` with its own exit code, never `allow` (and never 2, which blocks)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vicar.hooks import protocol as p
from vicar.hooks.tool_call import gate_id_for, gate_request
from vicar.settings import Settings
from vicar.settings.hook import HookParams

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
ROOT = Path(__file__).resolve().parents[1]


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def run_hook(stdin: bytes, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The thin command as Claude Code runs it: a process, the input on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "vicar.hooks", "claude-code", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
    )


def assert_asks(done: subprocess.CompletedProcess, event: str | None, code: int) -> dict:
    """An ask in the event's words (PreToolUse: `ask`; others: no decision), the failure's
    exit code, one line on stderr and no traceback."""
    assert done.returncode == code, done
    body = json.loads(done.stdout)
    assert p.decision_of(body) == "ask"
    if event == p.PRE_TOOL_USE:
        assert body["hookSpecificOutput"]["permissionDecision"] == "ask"
    else:
        assert "hookSpecificOutput" not in body  # no decision: the agent's own dialog shows
    err = done.stderr.decode()
    assert err.startswith("vicar hook: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return body


def test_every_documented_input_reads_and_becomes_an_intent_gate():
    settings = Settings(hook=HookParams(principal="alice"))
    seen = {}
    for path in sorted(FIXTURES.glob("*.json")):
        call = p.parse(path.read_bytes())
        if call["hook_event_name"] == p.POST_TOOL_USE:
            continue
        req = gate_request(call, settings, "alice")
        assert req.state.value == "INTENT_ASSERT" and req.upstream_agent == "claude-code"
        assert req.task_type == call["tool_name"].lower()
        seen[path.stem] = req
    bash = seen["pre_tool_use_bash"]
    assert bash.artifact_text == "$ npm test" and bash.actor_message == "Run test suite"
    assert bash.lineage == "bash:npm test" and bash.gate_id == gate_id_for("abc123", "toolu_01ABC123...")
    assert "in /home/user/my-project" in bash.question
    edit = seen["pre_tool_use_edit"].artifact_text
    assert "--- a/src/app.py" in edit and "-retries = 3\n" in edit and "+retries = 5" in edit
    assert seen["pre_tool_use_write"].artifact_text.startswith("--- /dev/null\n+++ b/notes.txt")
    fetch = seen["pre_tool_use_webfetch"]
    assert fetch.artifact_text.startswith("https://example.com/api") and fetch.lineage == "webfetch:example.com"
    assert json.loads(seen["pre_tool_use_mcp"].artifact_text)["title"] == "Flaky test"
    # PermissionRequest has no tool_use_id: a fresh gate each time, never another call's.
    asked = p.parse((FIXTURES / "permission_request_bash.json").read_bytes())
    assert gate_request(asked, settings, "alice").gate_id != gate_request(asked, settings, "alice").gate_id
    # The PostToolUse of the Bash call names the PreToolUse's gate.
    post = fixture("post_tool_use_bash")
    assert gate_id_for(post["session_id"], post["tool_use_id"]) == bash.gate_id


def test_the_answers_speak_each_events_words():
    out = {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "ok"}
    assert p.allow(p.PRE_TOOL_USE, "ok") == {"hookSpecificOutput": out}
    assert p.deny(p.PERMISSION_REQUEST, "no")["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "no"}
    assert p.allow(p.PERMISSION_REQUEST, "ok")["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    assert p.ask(p.PERMISSION_REQUEST, "why") == {"systemMessage": "why"}
    long = p.deny(p.PRE_TOOL_USE, "x" * 9000)["hookSpecificOutput"]["permissionDecisionReason"]
    assert len(long) == p.MAX_REASON_CHARS


@pytest.mark.parametrize(
    "raw, says",
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"hook_event_name": "Stop"}', "hook_event_name 'Stop'"),
        (json.dumps({**fixture("pre_tool_use_bash"), "tool_input": "rm -rf /"}).encode(), "tool_input"),
        (json.dumps({**fixture("pre_tool_use_bash"), "tool_name": ""}).encode(), "tool_name"),
        (json.dumps({**fixture("post_tool_use_bash"), "tool_use_id": None}).encode(), "tool_use_id"),
        (b"[" * 100_000, "not JSON"),
        (b" " * (p.MAX_INPUT_BYTES + 1), "over 2 MiB"),
    ],
)
def test_bad_input_is_one_line_and_asks(raw, says, tmp_path):
    token = tmp_path / "token"
    token.write_text("t" * 32)
    done = run_hook(raw, "--url", "http://127.0.0.1:9/never", "--token-file", str(token))
    assert_asks(done, p.event_of(raw), p.BAD_INPUT_EXIT)
    assert says in done.stderr.decode()


def test_an_unreachable_server_asks(tmp_path):
    token = tmp_path / "token"
    token.write_text("t" * 32)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    raw = json.dumps(fixture("pre_tool_use_bash")).encode()
    done = run_hook(raw, "--url", f"http://127.0.0.1:{port}/hooks/claude-code", "--token-file", str(token))
    body = assert_asks(done, p.PRE_TOOL_USE, p.UNREACHABLE_EXIT)
    assert "unreachable" in body["hookSpecificOutput"]["permissionDecisionReason"]
    raw = json.dumps(fixture("permission_request_bash")).encode()
    done = run_hook(raw, "--url", f"http://127.0.0.1:{port}/hooks/claude-code", "--token-file", str(token))
    assert_asks(done, p.PERMISSION_REQUEST, p.UNREACHABLE_EXIT)


def test_a_server_that_crashes_mid_call_asks(tmp_path):
    """The server takes the call and dies before answering (its process gone: the
    connection closes): the agent is asked, not let through."""
    token = tmp_path / "token"
    token.write_text("t" * 32)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def crash() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=crash, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hooks/claude-code"
    done = run_hook(json.dumps(fixture("pre_tool_use_bash")).encode(), "--url", url, "--token-file", str(token))
    thread.join(10)
    listener.close()
    assert_asks(done, p.PRE_TOOL_USE, p.UNREACHABLE_EXIT)


def test_a_missing_token_file_or_usage_asks(tmp_path):
    raw = json.dumps(fixture("pre_tool_use_bash")).encode()
    done = run_hook(raw, "--url", "http://127.0.0.1:9/x", "--token-file", str(tmp_path / "none"))
    assert_asks(done, p.PRE_TOOL_USE, p.BAD_INPUT_EXIT)
    done = run_hook(raw, "--token-file", str(tmp_path / "none"))
    assert_asks(done, p.PRE_TOOL_USE, p.BAD_INPUT_EXIT)
    assert "usage:" in done.stderr.decode()


def test_the_full_cli_asks_when_temporal_is_unreachable(tmp_path):
    """`vicar hook claude-code` without --url opens the gate on Temporal itself: with no
    Temporal there, the agent is asked (exit 4), and with bad settings too (65, not the
    CLI's usual 2, which would block the call)."""
    import os

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}", "VICAR_DATA_DIR": str(tmp_path)}
    env["VICAR_HOOK_PRINCIPAL"] = "alice"
    raw = json.dumps(fixture("pre_tool_use_bash")).encode()
    cmd = [sys.executable, "-m", "vicar.cli", "hook", "claude-code"]
    done = subprocess.run(cmd, input=raw, capture_output=True, timeout=120, env=env, cwd=ROOT)
    assert_asks(done, p.PRE_TOOL_USE, p.UNREACHABLE_EXIT)
    done = subprocess.run(
        cmd, input=raw, capture_output=True, timeout=120, env={**env, "VICAR_HOOK_WAIT_SECONDS": "soon"}, cwd=ROOT
    )
    assert_asks(done, p.PRE_TOOL_USE, p.BAD_INPUT_EXIT)
    done = subprocess.run(cmd, input=b"{", capture_output=True, timeout=120, env=env, cwd=ROOT)
    assert_asks(done, None, p.BAD_INPUT_EXIT)


def test_vicar_hook_token_makes_the_token_file_once(tmp_path):
    import os
    import stat

    env = {**os.environ, "VICAR_DATA_DIR": str(tmp_path)}
    env.pop("VICAR_HOOK_TOKEN", None)
    cmd = [sys.executable, "-m", "vicar.cli", "hook", "token"]
    first = subprocess.run(cmd, capture_output=True, timeout=120, env=env, cwd=ROOT)
    path = Path(first.stdout.decode().strip())
    assert first.returncode == 0 and path == tmp_path / "hook-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text().strip()) >= 32
    token = path.read_text()
    again = subprocess.run(cmd, capture_output=True, timeout=120, env=env, cwd=ROOT)
    assert again.returncode == 0 and path.read_text() == token  # made once, then read
    short = subprocess.run(cmd, capture_output=True, timeout=120, env={**env, "VICAR_HOOK_TOKEN": "short"}, cwd=ROOT)
    assert short.returncode != 0 and "VICAR_HOOK_TOKEN must have at least 16 characters" in short.stderr.decode()
    assert "short" not in short.stderr.decode().replace("VICAR_HOOK_TOKEN", "")  # the secret is never shown
