"""Codex's hooks: the recorded inputs of Codex 0.171.0 (tests/fixtures/codex/) through the
thin command and the inbox's endpoint with a real worker, and the real Codex CLI
(`codex exec`, from the npm registry's @openai/codex; skipped when it is not installed)
against a local stand-in of the Responses API that asks for one shell call, with the hook
`vicar hook install codex` writes. For Codex a failed hook lets the call run, so every
answer but an approval must be a deny: the person's reject, no answer in time, Vicar
unreachable, the worker frozen."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vicar.client import add_rule, answer, get_gate, list_escalations
from vicar.hooks import install as inst
from vicar.hooks import protocol as p
from vicar.hooks.tool_call import gate_id_for, gate_request
from vicar.settings import Settings

from .codex_responses_standin import MODEL, CodexResponsesStandIn
from .conftest import wait_for
from .hook_world import FIXTURES, HookWorld, call, command, world  # noqa: F401

CODEX = os.environ.get("CODEX_BIN") or shutil.which("codex")


def test_the_recorded_inputs_become_gates_asked_by_codex():
    settings = Settings()
    for path in sorted((FIXTURES / "codex").glob("*pre_tool_use*.json")):
        data = p.parse(path.read_bytes())
        req = gate_request(data, settings, "alice", p.CODEX)
        assert req.upstream_agent == "codex" and req.question.startswith(f"Codex asks to use {data['tool_name']}")
        assert req.gate_id == gate_id_for(data["session_id"], data["tool_use_id"], p.CODEX)
        assert req.gate_id.startswith("codex/") and req.gate_id != gate_id_for(data["session_id"], data["tool_use_id"])
    patch = p.parse((FIXTURES / "codex" / "pre_tool_use_apply_patch.json").read_bytes())
    req = gate_request(patch, settings, "alice", p.CODEX)
    assert "+retries = 5" in req.artifact_text and req.lineage == "apply_patch:*.py"


def test_the_answers_are_what_codex_accepts():
    """Codex fails (and runs the call) on `allow` and `ask`: an approval is no objection,
    everything else a deny with a reason; a PermissionRequest keeps its decision object."""
    assert p.allow(p.PRE_TOOL_USE, "Vicar: approved by alice", p.CODEX) == {"systemMessage": "Vicar: approved by alice"}
    for said in (p.deny(p.PRE_TOOL_USE, "no", p.CODEX), p.ask(p.PRE_TOOL_USE, "later", p.CODEX)):
        out = said["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny" and out["permissionDecisionReason"].strip()
        assert set(out) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert p.ask(p.PERMISSION_REQUEST, "later", p.CODEX)["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    assert p.deny(p.PRE_TOOL_USE, "  ", p.CODEX)["hookSpecificOutput"]["permissionDecisionReason"] == "Vicar: denied"
    assert [p.failure_exit(p.CODEX, c) for c in (0, 4, 65, 70)] == [0, 2, 2, 2]


async def test_codex_inputs_through_the_thin_command(world):  # noqa: F811
    principal = world.configure(wait=60)
    rule = dict(name="tests-run", effect="approve", task_types=["bash"])
    await add_rule(world.client, principal, rule, by=principal, task_queue=world.settings.task_queue)
    data = call("captured_0.171.0_pre_tool_use_bash", p.CODEX)
    code, body, err = await command(world, data, p.CODEX)
    assert (code, body, err) == (0, {"systemMessage": f"Vicar: approved by {principal}'s rule tests-run"}, "")
    result = await (
        await get_gate(world.client, gate_id_for(data["session_id"], data["tool_use_id"], p.CODEX))
    ).result()
    assert result.answered_by.value == "rule"
    # No answer in time: a deny naming the person and the wait, exit 0 (a decision).
    world.configure(wait=1)
    code, body, err = await command(world, call("pre_tool_use_bash", p.CODEX), p.CODEX)
    assert (code, p.decision_of(body, p.CODEX)) == (0, "deny"), err
    assert "has not answered within 1 s" in body["hookSpecificOutput"]["permissionDecisionReason"]
    # The thin command's own --timeout below the gate's wait: the server answers first.
    world.configure(wait=60)
    started = time.monotonic()
    code, body, err = await command(world, call("pre_tool_use_bash", p.CODEX), p.CODEX, "--timeout", "6")
    assert (code, p.decision_of(body, p.CODEX)) == (0, "deny") and time.monotonic() - started < 6, err
    # Unreachable: a deny, exit 2 (Codex's blocking exit), the reason on stderr.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    gone = HookWorld(world.client, world.app, f"http://127.0.0.1:{closed}", world.settings, world.worker)
    code, body, err = await command(gone, data, p.CODEX, token_file=world.token_file)
    assert (code, p.decision_of(body, p.CODEX)) == (2, "deny") and "unreachable" in err and err.count("\n") == 1


# -- vicar hook install --------------------------------------------------------------------


def run_vicar(*argv: str, env: dict[str, str]) -> Any:
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "vicar.cli", *argv], capture_output=True, text=True, timeout=120, env=env
    )


async def test_vicar_hook_install_writes_full_paths_and_checks_them(world, tmp_path):  # noqa: F811
    principal = world.configure(wait=60)
    env = {**os.environ, "VICAR_DATA_DIR": str(world.settings.data_dir), "VICAR_HOOK_WAIT_SECONDS": "90"}
    claude = tmp_path / "claude" / "settings.json"
    claude.parent.mkdir()
    theirs = {"matcher": "Write", "hooks": [{"type": "command", "command": "/usr/bin/true"}]}
    claude.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [theirs]}}))
    for agent, path in ((p.CLAUDE_CODE, claude), (p.CODEX, tmp_path / "codex" / "hooks.json")):
        argv = ["hook", "install", agent, "--principal", principal, "--url", world.base, "--settings", str(path)]
        for _ in range(2):  # again: replaced, not added
            done = await asyncio.to_thread(run_vicar, *argv, env=env)
            assert done.returncode == 0, done.stderr
        assert f"takes this hook's calls as {principal}'s" in done.stdout
        assert f"no inbox account in {world.settings.data_dir} answers for {principal}" in done.stdout
        written = json.loads(path.read_text())
        ours = [g for g in written["hooks"]["PreToolUse"] if "vicar.hooks" in json.dumps(g)]
        [hook] = ours[0]["hooks"]
        assert len(ours) == 1 and hook["timeout"] == 90 + inst.THIN_MARGIN + inst.AGENT_MARGIN
        assert hook["command"].startswith(sys.executable) and str(world.settings.data_dir) in hook["command"]
        assert hook["command"].endswith("|| exit 2") == (agent == p.CODEX)
    assert theirs in json.loads(claude.read_text())["hooks"]["PreToolUse"] and "model" in json.loads(claude.read_text())
    # A URL where no inbox answers: written, but the check fails in one line.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    argv = ["hook", "install", "codex", "--principal", principal, "--url", f"http://127.0.0.1:{closed}"]
    done = await asyncio.to_thread(run_vicar, *argv, "--settings", str(tmp_path / "bad.json"), env=env)
    assert done.returncode != 0 and "failed its check" in done.stderr and "Traceback" not in done.stderr


# -- the real Codex CLI --------------------------------------------------------------------


def codex_or_skip() -> str:
    if not CODEX or not os.access(CODEX, os.X_OK):
        pytest.skip(
            "the Codex CLI is not installed: `npm install @openai/codex` in a directory of your choice, then "
            "CODEX_BIN=<that dir>/node_modules/.bin/codex (or put `codex` on PATH)"
        )
    return CODEX


async def run_codex(w: HookWorld, tmp: Path, standin: CodexResponsesStandIn, url: str | None = None) -> dict:
    """`codex exec` in tmp/project, its Responses API the stand-in, the hook as `vicar hook
    install codex` writes it (full paths), trusted for this run (--dangerously-bypass-hook-trust:
    in a person's own use, trusted once through /hooks). Commands run unsandboxed, so the
    hook is the only gate: the worst case."""
    home, project = tmp / "codex-home", tmp / "project"
    home.mkdir()
    project.mkdir()
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "standin"\n[model_providers.standin]\nname = "standin"\n'
        f'base_url = "{standin.url}"\nwire_api = "responses"\nenv_key = "STANDIN_KEY"\n'
    )
    wait = w.app.state.inbox.settings.hook.wait_seconds
    inst.install(p.CODEX, home / "hooks.json", url or w.base, w.token_file, wait)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "CODEX_HOME": str(home), "STANDIN_KEY": "sk-standin"}
    argv = [codex_or_skip(), "exec", "--dangerously-bypass-hook-trust", "--dangerously-bypass-approvals-and-sandbox"]
    argv += ["--skip-git-repo-check", "-C", str(project), "Create the marker file."]
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    [output] = standin.tool_outputs()
    return {"output": output.get("output", ""), "stderr": err.decode()}


def marker_standin(tmp: Path) -> tuple[CodexResponsesStandIn, Path]:
    marker = tmp / "project" / "ran-marker"
    return CodexResponsesStandIn(f"touch {marker}"), marker


async def test_the_real_codex_runs_the_command_after_vicars_allow(world, tmp_path):  # noqa: F811
    codex_or_skip()
    principal = world.configure(wait=60)
    rule = dict(name="touch-ok", effect="approve", task_types=["bash"], lineages=["bash:touch"])
    await add_rule(world.client, principal, rule, by=principal, task_queue=world.settings.task_queue)
    standin, marker = marker_standin(tmp_path)
    try:
        ran = await run_codex(world, tmp_path, standin)
    finally:
        standin.close()
    assert marker.exists() and "PreToolUse Failed" not in ran["stderr"], ran
    [gate] = [g for g in await recent(world, principal)]
    result = await (await get_gate(world.client, gate)).result(timeout=10)
    assert (result.answered_by.value, result.task_type) == ("rule", "bash")


async def recent(w: HookWorld, principal: str) -> list[str]:
    """The gate ids of the principal's gates (decided or not), from the visibility store."""
    from vicar.workflows import search_attributes as sa

    query = f"{sa.PRINCIPAL.name} = '{principal}'"

    async def listed() -> list[str]:
        found = [wf.id.removeprefix("vicar-gate/") async for wf in w.client.list_workflows(query)]
        return [g for g in found if g.startswith("codex/")]

    return await wait_for(listed, timeout=30)


async def test_the_real_codex_does_not_run_the_command_after_the_persons_reject(world, tmp_path):  # noqa: F811
    codex_or_skip()
    principal = world.configure(wait=120)
    standin, marker = marker_standin(tmp_path)
    try:
        running = asyncio.ensure_future(run_codex(world, tmp_path, standin))
        [waiting] = await wait_for(lambda: list_escalations(world.client, principal), timeout=120)
        assert waiting.question.startswith("Codex asks to use Bash")
        await answer(world.client, waiting.gate_id, dict(action="reject", text="no markers today", responder=principal))
        ran = await running
    finally:
        standin.close()
    assert not marker.exists()
    assert "Command blocked by PreToolUse hook: Vicar:" in ran["output"] and "no markers today" in ran["output"]


@pytest.mark.parametrize("failure", ["no answer in time", "vicar unreachable", "worker frozen"])
async def test_the_real_codex_does_not_run_the_command_on_any_failure(world, tmp_path, failure):  # noqa: F811
    codex_or_skip()
    world.configure(wait=3 if failure == "no answer in time" else 120)
    url = None
    if failure == "vicar unreachable":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
    pid = world.worker.proc.pid if world.worker.proc else 0
    if failure == "worker frozen":
        os.kill(pid, signal.SIGSTOP)
    standin, marker = marker_standin(tmp_path)
    started = time.monotonic()
    try:
        ran = await run_codex(world, tmp_path, standin, url)
    finally:
        standin.close()
        if failure == "worker frozen":
            os.kill(pid, signal.SIGCONT)
    assert not marker.exists(), ran
    assert "Command blocked by PreToolUse hook" in ran["output"], ran
    said = {
        "no answer in time": "has not answered within 3 s",
        "vicar unreachable": "Vicar is unreachable",
        "worker frozen": "Vicar's worker did not respond",
    }[failure]
    assert said in ran["output"], ran["output"]
    if failure == "worker frozen":
        assert time.monotonic() - started < 30


async def test_a_codex_hook_pointed_at_claude_codes_endpoint_still_fails_closed(world):  # noqa: F811
    """The thin command knows its agent: Claude Code's `allow` and `ask` (which Codex takes
    as a failed hook, and runs the call) reach Codex as no objection and a deny."""
    principal = world.configure(wait=1)
    rule = dict(name="tests-run", effect="approve", task_types=["bash"], lineages=["bash:npm test"])
    await add_rule(world.client, principal, rule, by=principal, task_queue=world.settings.task_queue)
    wrong = HookWorld(world.client, world.app, world.base, world.settings, world.worker, world.token_file)
    wrong.url = lambda agent=p.CLAUDE_CODE: f"{world.base}/hooks/claude-code"
    code, body, err = await command(wrong, call("pre_tool_use_bash", p.CODEX), p.CODEX)
    assert (code, body) == (0, {"systemMessage": f"Vicar: approved by {principal}'s rule tests-run"}), err
    other = call("pre_tool_use_bash", p.CODEX, tool_input={"command": "make deploy"})
    code, body, err = await command(wrong, other, p.CODEX)
    assert (code, p.decision_of(body, p.CODEX)) == (0, "deny") and "has not answered" in json.dumps(body), err
