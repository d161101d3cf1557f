"""The hook end to end: a real worker process, the inbox served by uvicorn with its hook
endpoint, and the documented hook inputs (tests/fixtures/claude_code/) fed to the real
thin command (a process, as Claude Code starts it) and posted to the endpoint (as Claude
Code's HTTP hook does). A rule allows; the person's reject denies with their words; no
answer in time asks, and the PostToolUse that follows answers nothing.

Then the real Claude Code CLI (`claude -p`, from the npm registry's
@anthropic-ai/claude-code; skipped when it is not installed) against a local stand-in of
the Messages API that asks for one Bash call, with Vicar's hook configured: the call runs
after Vicar's allow and not after its deny."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from vicar.client import add_rule, answer, get_gate, list_escalations
from vicar.hooks import install as inst
from vicar.hooks import protocol as p
from vicar.hooks.tool_call import gate_id_for

from .claude_messages_standin import ClaudeMessagesStandIn
from .conftest import wait_for
from .hook_world import HookWorld, call, command, escalated, escalated_now, post, world  # noqa: F401


async def test_a_rule_allows_through_the_command_and_the_endpoint(world):
    principal = world.configure(wait=60)
    await add_rule(
        world.client,
        principal,
        dict(name="tests-run", effect="approve", task_types=["bash"]),
        by=principal,
        task_queue=world.settings.task_queue,
    )
    data = call("pre_tool_use_bash")
    code, body, err = await command(world, data)
    assert (code, p.decision_of(body), err) == (0, "allow", "")
    assert body["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    gate = await get_gate(world.client, gate_id_for(data["session_id"], data["tool_use_id"]))
    result = await gate.result(timeout=10)
    assert result.answered_by.value == "rule" and result.task_type == "bash"
    # The reason names the rule that allowed it.
    assert body["hookSpecificOutput"]["permissionDecisionReason"] == f"Vicar: approved by {principal}'s rule tests-run"
    # The same through the HTTP form, and for PermissionRequest (its own decision object).
    status, body, _ = await asyncio.to_thread(post, world, call("pre_tool_use_bash"))
    assert (status, p.decision_of(body)) == (200, "allow")
    # (Not the fixture's `rm -rf`: Vicar's default rules send deleting files to the person.)
    asked = call("permission_request_bash", tool_input={"command": "npm test", "description": "Run the tests"})
    status, body, _ = await asyncio.to_thread(post, world, asked)
    assert (status, body["hookSpecificOutput"]["decision"]) == (200, {"behavior": "allow"}), body


async def test_the_persons_reject_denies_with_their_words(world):
    principal = world.configure(wait=90)
    data = call("pre_tool_use_edit")
    hook = asyncio.ensure_future(command(world, data))
    gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
    details = await escalated(world.client, gate_id)
    assert (
        details.task_type == "edit"
        and "retries = 5" in (await (await get_gate(world.client, gate_id)).view()).model_dump_json()
    )
    await answer(world.client, gate_id, dict(action="reject", text="keep 3 retries", responder=principal))
    code, body, err = await hook
    assert (code, p.decision_of(body), err) == (0, "deny", "")
    assert "keep 3 retries" in body["hookSpecificOutput"]["permissionDecisionReason"]
    result = await (await get_gate(world.client, gate_id)).result(timeout=10)
    assert result.answered_by.value == "human" and result.responder == principal  # learned as any answer


async def test_no_answer_in_time_asks_and_the_post_tool_use_changes_nothing(world):
    principal = world.configure(wait=1.0)
    data = call("pre_tool_use_bash")
    code, body, _ = await command(world, data)
    assert (code, p.decision_of(body)) == (0, "ask")
    assert f"{principal} has not answered within 1 s" in body["hookSpecificOutput"]["permissionDecisionReason"]
    gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
    await escalated(world.client, gate_id)  # the gate stays open after the fallback
    # The tool ran (the person allowed it in Claude Code's prompt, or anyone with the
    # token says so): nothing is answered, the gate still waits for the person.
    post_call = call("post_tool_use_bash", session_id=data["session_id"], tool_use_id=data["tool_use_id"])
    code, body, err = await command(world, post_call)
    assert (code, body, err) == (0, {}, "")
    assert await escalated_now(world.client, gate_id) is not None
    with pytest.raises(TimeoutError):
        await (await get_gate(world.client, gate_id)).result(timeout=2)
    # The person may still answer it in the inbox: that is learned.
    await answer(world.client, gate_id, dict(action="approve", text="fine", responder=principal))
    result = await (await get_gate(world.client, gate_id)).result(timeout=20)
    assert (result.action.value, result.answered_by.value, result.responder) == ("approve", "human", principal)


async def test_the_proxy_learns_the_persons_answers_and_then_allows_alone(world):
    """The person approves `npm test` from the inbox while the hook waits; after a few such
    answers (probation: three of the agent's; the loosened rule) the proxy allows alone."""
    principal = world.configure(wait=60)
    by_person = 0
    for _ in range(12):
        data = call("pre_tool_use_bash")
        gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
        hook = asyncio.ensure_future(command(world, data))
        while not hook.done():
            details = await escalated_now(world.client, gate_id)
            if details is not None:
                await answer(world.client, gate_id, dict(action="approve", text="tests are fine", responder=principal))
                by_person += 1
                break
            await asyncio.sleep(0.1)
        code, body, _ = await hook
        assert (code, p.decision_of(body)) == (0, "allow")
        reason = body["hookSpecificOutput"]["permissionDecisionReason"]
        if "proxy" in reason:
            break
        assert reason == f"Vicar: approved by {principal}"
    else:
        raise AssertionError("the proxy never answered alone")
    assert 3 <= by_person < 12
    result = await (await get_gate(world.client, gate_id)).result(timeout=10)
    assert result.answered_by.value == "proxy" and not result.escalated


def declared_too_long(w: HookWorld) -> bytes:
    """A request declaring a body over the protocol's bound, sending a few bytes of it."""
    import socket

    host, port = w.base.removeprefix("http://").split(":")
    token = w.token_file.read_text().strip()
    head = (
        f"POST /hooks/claude-code HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {p.MAX_INPUT_BYTES + 1}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(head.encode() + b'{"hook_event_name": "PreToolUse"')
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply.partition(b"\r\n\r\n")[2]) < length_of(reply):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
        return reply


def length_of(reply: bytes) -> int:
    for line in reply.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def test_the_endpoint_refuses_a_call_without_its_token_and_asks_on_bad_input(world):
    world.configure(wait=5)
    # A wrong token opens nothing, and says so where the person reads it (Claude Code shows
    # nothing of a non-2xx answer: its HTTP hook would fall back silently).
    status, body, headers = await asyncio.to_thread(post, world, call("pre_tool_use_bash"), "wrong-token-wrong-token")
    assert (status, p.decision_of(body), headers[p.EXIT_HEADER.lower()]) == (200, "ask", str(p.UNREACHABLE_EXIT))
    assert "hook token was refused" in body["hookSpecificOutput"]["permissionDecisionReason"]
    status, body, _ = await asyncio.to_thread(post, world, {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
    assert (status, p.decision_of(body)) == (200, "ask")
    # A body declared past the protocol's bound: answered from the declaration, unread (so
    # its event is unknown: no decision, the agent's own permission flow; never allow).
    reply = await asyncio.to_thread(declared_too_long, world)
    head, _, body_bytes = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and p.decision_of(json.loads(body_bytes)) == "ask"
    assert b"over 2 MiB" in body_bytes and b"allow" not in body_bytes
    assert f"{p.EXIT_HEADER.lower()}: {p.BAD_INPUT_EXIT}".encode() in reply.lower()
    # A tool name with a newline in it: still one line back, never a broken header.
    code, body, err = await command(world, call("pre_tool_use_bash", tool_name="Bash\nX-Injected: 1", tool_input=[]))
    assert (code, p.decision_of(body)) == (p.BAD_INPUT_EXIT, "ask") and err.count("\n") == 1
    # The thin command with the wrong token: ask, exit 4, one line.
    bad = world.token_file.with_name(".other-token")
    bad.write_text("x" * 40)
    code, body, err = await command(world, call("pre_tool_use_bash"), token_file=bad)
    assert (code, p.decision_of(body)) == (p.UNREACHABLE_EXIT, "ask") and "token was refused" in err
    # The first version's single token with no VICAR_HOOK_PRINCIPAL: every call asks.
    world.configure(wait=5, single=True)
    world.app.state.inbox.settings = world.settings
    code, body, err = await command(world, call("pre_tool_use_bash"))
    assert (code, p.decision_of(body)) == (p.UNREACHABLE_EXIT, "ask") and "VICAR_HOOK_PRINCIPAL" in err


# -- the real Claude Code CLI ------------------------------------------------------------

CLAUDE = os.environ.get("CLAUDE_CODE_BIN") or shutil.which("claude")


def claude_or_skip() -> str:
    if not CLAUDE or not os.access(CLAUDE, os.X_OK):
        pytest.skip(
            "the Claude Code CLI is not installed: `npm install @anthropic-ai/claude-code` in a directory of "
            "your choice, then CLAUDE_CODE_BIN=<that dir>/node_modules/.bin/claude (or put `claude` on PATH)"
        )
    return CLAUDE


async def run_claude(
    w: HookWorld,
    home: Path,
    project: Path,
    standin: ClaudeMessagesStandIn,
    form: str = "command",
    token: str | None = None,
) -> dict:
    """`claude -p` in `project`, its Messages API the stand-in, Vicar as its PreToolUse hook
    in the `command` form `vicar hook install claude-code` writes (full paths, its matcher)
    or the `http` form of docs/claude-code.md (with `token`, another token): its JSON result."""
    settings = home / "settings.json"
    if form == "http":
        hook: dict[str, Any] = {
            "type": "http",
            "url": w.url(),
            "headers": {"Authorization": "Bearer $HOOK_TOKEN"},
            "allowedEnvVars": ["HOOK_TOKEN"],
            "timeout": 120,
        }
        settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}))
    else:
        wait = w.app.state.inbox.settings.hook.wait_seconds
        inst.install(p.CLAUDE_CODE, settings, w.base, w.token_file, wait)
        assert await asyncio.to_thread(inst.verify, settings, p.CLAUDE_CODE)  # as `vicar hook install` checks
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),  # no user settings of this machine's
        "ANTHROPIC_BASE_URL": standin.url,
        "ANTHROPIC_API_KEY": "sk-ant-standin",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "HOOK_TOKEN": token or w.token_file.read_text().strip(),  # what the http form's header names
    }
    argv = [claude_or_skip(), "-p", "Create the marker file.", "--settings", str(settings), "--output-format", "json"]
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=project, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out)


@pytest.mark.parametrize("form", ["command", "http"])
async def test_the_real_claude_code_runs_the_tool_after_vicars_allow(world, tmp_path, form):
    claude_or_skip()
    principal = world.configure(wait=60)
    await add_rule(
        world.client,
        principal,
        dict(name="touch-ok", effect="approve", task_types=["bash"]),
        by=principal,
        task_queue=world.settings.task_queue,
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    marker = tmp_path / "project" / "ran-marker"
    standin = ClaudeMessagesStandIn(f"touch {marker}")
    try:
        result = await run_claude(world, tmp_path / "home", tmp_path / "project", standin, form)
    finally:
        standin.close()
    assert marker.exists() and result["permission_denials"] == []
    [tool_result] = standin.tool_results()
    assert tool_result["tool_use_id"] == standin.tool_use_id and not tool_result.get("is_error")
    gate = await get_gate(world.client, gate_id_for(result["session_id"], standin.tool_use_id))
    decided = await gate.result(timeout=10)
    assert decided.answered_by.value == "rule" and decided.task_type == "bash"
    assert f"touch {marker}" in decided_artifact(await gate.view())


async def test_the_real_claude_code_does_not_run_the_tool_after_the_persons_reject(world, tmp_path):
    claude_or_skip()
    principal = world.configure(wait=120)
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    marker = tmp_path / "project" / "ran-marker"
    standin = ClaudeMessagesStandIn(f"touch {marker}")
    try:
        running = asyncio.ensure_future(run_claude(world, tmp_path / "home", tmp_path / "project", standin))
        # The person, on their phone: the gate waits in the inbox; they reject it.
        [waiting] = await wait_for(lambda: list_escalations(world.client, principal), timeout=120)
        await answer(world.client, waiting.gate_id, dict(action="reject", text="no markers today", responder=principal))
        result = await running
    finally:
        standin.close()
    assert not marker.exists()
    assert [d["tool_use_id"] for d in result["permission_denials"]] == [standin.tool_use_id]
    [tool_result] = standin.tool_results()
    assert tool_result["is_error"] and "no markers today" in json.dumps(tool_result["content"])


def decided_artifact(view: Any) -> str:
    return view.model_dump_json()


async def test_the_real_claude_code_shows_a_refused_token_in_the_http_form(world, tmp_path):
    """A wrong token in the HTTP form: before, a 401, which Claude Code takes as a
    non-blocking error and falls back to its own flow without a word from Vicar. Now the
    call is not run and what Claude reads says the token was refused."""
    claude_or_skip()
    world.configure(wait=30)
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    marker = tmp_path / "project" / "ran-marker"
    standin = ClaudeMessagesStandIn(f"touch {marker}")
    try:
        result = await run_claude(
            world, tmp_path / "home", tmp_path / "project", standin, "http", token="wrong-token-" + "x" * 30
        )
    finally:
        standin.close()
    assert not marker.exists()
    assert [d["tool_use_id"] for d in result["permission_denials"]] == [standin.tool_use_id]
    [tool_result] = standin.tool_results()
    assert tool_result["is_error"] and "hook token was refused" in json.dumps(tool_result["content"])


async def test_one_inbox_serves_every_principals_hooks_by_their_tokens(world):
    """Two principals' hooks on one inbox at once: each token opens its own principal's
    gates; a principal named in the URL must be the token's; GET says whose a token is."""
    first = world.configure(wait=8)
    first_token = world.token_file.read_text().strip()
    second = world.configure(wait=8)
    second_token = world.token_file.read_text().strip()
    for principal, token in ((first, first_token), (second, second_token)):
        data = call("pre_tool_use_bash")
        status, body, _ = await asyncio.to_thread(post, world, data, token)
        assert (status, p.decision_of(body)) == (200, "ask")
        assert f"{principal} has not answered" in body["hookSpecificOutput"]["permissionDecisionReason"]
        gate = await get_gate(world.client, gate_id_for(data["session_id"], data["tool_use_id"]))
        assert (await gate.details()).principal == principal
    status, body, headers = await asyncio.to_thread(
        post, world, call("pre_tool_use_bash"), first_token, f"{world.url()}/{second}"
    )
    assert (status, p.decision_of(body), headers[p.EXIT_HEADER.lower()]) == (200, "ask", str(p.UNREACHABLE_EXIT))
    assert f"not '{second}''s" in body["hookSpecificOutput"]["permissionDecisionReason"]
    named = f"{world.url()}/{second}"
    status, body, _ = await asyncio.to_thread(post, world, call("pre_tool_use_bash"), second_token, named)
    assert f"{second} has not answered" in body["hookSpecificOutput"]["permissionDecisionReason"]

    def check(token: str) -> tuple[int, dict]:
        request = urllib.request.Request(world.url(p.CODEX), headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    assert await asyncio.to_thread(check, first_token) == (200, {"principal": first, "agent": "codex"})
    status, body = await asyncio.to_thread(check, "x" * 40)
    assert status == 401 and "principal" not in body
