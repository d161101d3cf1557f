"""A new member of a team, through the Claude Code hook, under the shipped autonomy rule and
the shipped predictor (the learned one, which reads the team's counts): how many times is
the person asked about `git status`, which the other members approve, before Vicar answers
it alone (or the person accepts the rule their habit suggests)?

A real worker process on the Temporal dev server, the inbox's hook endpoint served by
uvicorn, membership set with `vicar team set` as an operator does. Every call, the other
members' too, goes through the real hook command (a process per call, as Claude Code starts
it); the person answers through the client, in the inbox's stead, each time Vicar asks. The
other members approve until the team's pooled bound proves a threshold (about a hundred
answers: a spotless record needs that many to prove a 5% error)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any

import pytest_asyncio

from vicar.client import answer, get_gate
from vicar.contracts import gate_workflow_id
from vicar.hooks import protocol as p
from vicar.hooks.tokens import principal_token
from vicar.hooks.tool_call import gate_id_for
from vicar.models import AnsweredBy
from vicar.proxy.autonomy.team import TeamLedger
from vicar.proxy.habits import MIN_RUN
from vicar.proxy.team_store import counts_for, team_draws, team_of
from vicar.settings import Settings
from vicar.settings.hook import HookParams

from .conftest import ROOT, WorkerProcess, wait_for
from .hook_world import HookWorld, call, command, escalated_now, polled
from .inbox_world import free_port
from .test_team_live import opened_payloads

GOAL = 10  # asks of the new member about `git status`, at most (the team prior's goal)
MOST = 15  # calls tried before the test gives up on a lone answer
TEAM_MOST = 160  # gates per other member before the test gives up on the team's bound
ROUTINE = (("git status", "Show the working tree status"), ("ls -la", "List the files"))


@pytest_asyncio.fixture
async def shipped(temporal_env, tmp_path):
    """A worker process under the shipped autonomy rule (5% target, 5% audits) and the inbox
    with its hook endpoint on the same data dir, as one machine serves a team."""
    import uvicorn

    from vicar.inbox.app import create_app

    data_dir = tmp_path / "vicar"
    worker = WorkerProcess(
        temporal_env, data_dir, VICAR_OPS_ADDRESS=None, VICAR_METRICS_ADDRESS=None, VICAR_PREDICTOR="learned"
    )
    await worker.start()
    server = None
    serving = None
    try:
        await wait_for(lambda: polled(temporal_env.client, worker.task_queue), timeout=120)
        settings = Settings(data_dir=data_dir, task_queue=worker.task_queue, hook=HookParams(wait_seconds=60))
        app = create_app(settings, temporal_env.client)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        serving = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        yield HookWorld(temporal_env.client, app, f"http://127.0.0.1:{port}", settings, worker)
    finally:
        if server is not None and serving is not None:
            server.should_exit = True
            await serving
        if worker.proc is not None and worker.proc.returncode is None:
            await worker.stop()


async def vicar(w: HookWorld, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """`vicar ARGS` in its own process, on the world's data dir, Temporal and task queue."""
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": w.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": w.settings.task_queue,
        "VICAR_DATA_DIR": str(w.settings.data_dir),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        *args,
        env=env,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def bash_call(command_line: str, description: str) -> dict:
    return call(
        "pre_tool_use_bash", cwd="/home/dev/shop", tool_input={"command": command_line, "description": description}
    )


async def approve_as_member(w: HookWorld, member: str, i: int, secret: str) -> str:
    """One of a member's routine calls through the real hook command, approved by them when
    Vicar asks (their words and a path carry `secret`). Its gate id."""
    text, description = ROUTINE[i % len(ROUTINE)]
    data = bash_call(f"{text} {secret}-{i}", f"{description} ({secret})")
    gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
    _, token = principal_token(w.settings, member)
    hook = asyncio.ensure_future(command(w, data, token_file=token))
    if await asked_or_decided(w, gate_id, hook) is not None:
        await answer(w.client, gate_id, dict(action="approve", text=f"fine, {secret}", responder=member))
    code, body, err = await hook
    assert (code, p.decision_of(body)) == (0, "allow"), (code, body, err)
    return gate_id


async def suggested(w: HookWorld, who: str) -> str | None:
    """The name of the rule `vicar rules suggest` offers `who` for `git status`, if any."""
    code, out, err = await vicar(w, "rules", "suggest", who, "--output", "json")
    assert code == 0, err
    return next((s["rule"]["name"] for s in json.loads(out) if "git status" in s["kind"]), None)


async def asked_or_decided(w: HookWorld, gate_id: str, hook: asyncio.Future) -> Any:
    """The gate's details once it waits for the person; None if the hook decided first."""
    while not hook.done():
        details = await escalated_now(w.client, gate_id)
        if details is not None:
            return details
        await asyncio.sleep(0.1)
    return None


async def test_a_new_member_is_asked_about_git_status_at_most_ten_times(shipped):
    w = shipped
    data_dir = w.settings.data_dir
    team = f"platform-{uuid.uuid4().hex[:6]}"
    alice, carol, bob = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("alice", "carol", "bob"))
    secret = f"alice-only-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    # The operator puts the three in one team.
    done = await asyncio.gather(*(vicar(w, "team", "set", who, team) for who in (alice, carol, bob)))
    assert all(code == 0 for code, _, _ in done), done
    assert {team_of(data_dir, who) for who in (alice, carol, bob)} == {team}

    # Alice and Carol approve their routine calls (`git status`, `ls -la`), side by side,
    # until the team's draws prove a threshold under the shipped rule.
    params = w.settings.calibration.autonomy
    ledger = TeamLedger(params.target_error, params.delta, params.weighting == "ipw")

    def proven() -> bool:
        ledger.update(data_dir, team)
        return ledger.rule(params.audit_share).threshold is not None

    others: list[str] = []

    async def member(who: str) -> None:
        for i in range(TEAM_MOST):
            if proven():
                return
            others.append(await approve_as_member(w, who, i, secret))

    await asyncio.gather(member(alice), member(carol))
    threshold = ledger.rule(params.audit_share).threshold
    assert threshold is not None, f"the team's {len(others)} gates proved no threshold"
    team_time = time.monotonic() - started

    # Bob's `git status` calls through the real hook command: the person answers each time
    # Vicar asks, until the hook answers `allow` alone (or Bob accepts a suggested rule).
    _, w.token_file = principal_token(w.settings, bob)
    asks: list[str] = []  # each ask's guard and note
    reasons: list[str] = []
    gates: list[str] = []
    how = None
    for _ in range(MOST):
        data = bash_call("git status", "Show the working tree status")
        gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
        gates.append(gate_id)
        hook = asyncio.ensure_future(command(w, data))
        details = await asked_or_decided(w, gate_id, hook)
        if details is not None:
            guess = f"{details.proxy_action.value if details.proxy_action else 'no guess'} {details.proxy_confidence}"
            asks.append(f"{details.calibration_guard} ({guess}): {details.calibration_note}")
            await answer(w.client, gate_id, dict(action="approve", text="yes, go on", responder=bob))
        code, body, err = await hook
        assert (code, p.decision_of(body)) == (0, "allow"), (code, body, err)
        reasons.append(body["hookSpecificOutput"]["permissionDecisionReason"])
        if details is None:
            assert reasons[-1] == f"Vicar: approved by {bob}'s proxy", reasons[-1]
            how = "alone"
            break
        if len(asks) >= MIN_RUN:
            name = await suggested(w, bob)
            if name is not None:  # accepted, the rule answers the next call
                code, _, err = await vicar(w, "rules", "suggest", bob, "--accept", name, "--by", bob)
                assert code == 0, err
                data = bash_call("git status", "Show the working tree status")
                gates.append(gate_id_for(data["session_id"], data["tool_use_id"]))
                code, body, err = await command(w, data)
                reasons.append(body["hookSpecificOutput"]["permissionDecisionReason"])
                assert (code, reasons[-1]) == (0, f"Vicar: approved by {bob}'s rule {name}"), (code, body, err)
                how = f"rule {name}"
                break
    figure = (
        f"{bob} was asked {len(asks)} times about `git status` before "
        f"{how or 'nothing'} (team: {len(others)} gates of the others, threshold {threshold:g}); asks: {asks}"
    )
    print(figure)
    assert how is not None and len(asks) <= GOAL, figure
    last = await (await get_gate(w.client, gates[-1])).result(timeout=10)
    if how == "alone":
        assert last.answered_by is AnsweredBy.proxy and "team" in last.calibration_note, last.calibration_note
        print(f"alone: {last.calibration_note}")

    # A never-seen destructive command is still the person's, through `vicar hook
    # claude-code` (the command inside the CLI): asked, and denied on their reject.
    data = bash_call("rm -rf build/", "Clean the build")
    gate_id = gate_id_for(data["session_id"], data["tool_use_id"])
    url, token = f"{w.base}/hooks/claude-code", str(w.token_file)
    cli = asyncio.ensure_future(
        vicar(w, "hook", "claude-code", "--url", url, "--token-file", token, stdin=json.dumps(data).encode())
    )
    details = await asked_or_decided(w, gate_id, cli)
    assert details is not None, await cli  # not allowed alone: Vicar asked
    print(f"rm -rf build/: asked, {details.calibration_guard}: {details.calibration_note}")
    await answer(w.client, gate_id, dict(action="reject", text="not the build", responder=bob))
    code, out, err = await cli
    assert (code, p.decision_of(json.loads(out))) == (0, "deny"), (code, out, err)

    # Nothing of the other members' words reaches Bob: not in what his proxy reads of the
    # team, not in the hook's answers, not in his gates' histories opened with the codec.
    counts = counts_for(data_dir, bob)
    assert counts is not None and counts.counts and secret not in json.dumps(counts.model_dump())
    assert not any(secret in r for r in reasons)
    for gate in [*gates, gate_id]:
        history = await w.client.get_workflow_handle(gate_workflow_id(gate)).fetch_history()
        events = await opened_payloads(w.client, history)
        assert events and ("git status" in events or "rm -rf" in events)  # read, opened
        assert secret not in events and not any(g in events for g in others)
    assert len(team_draws(data_dir, team)) >= 100
    assert await suggested(w, alice)  # what the fallback above reads is offered where earned
    print(f"team setup {team_time:.0f} s, in all {time.monotonic() - started:.0f} s")
