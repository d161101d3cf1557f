"""Sessions: working memory at the start, the idle timer (time-skipping test server)
starting consolidation, and a consolidation killed mid-way that finishes once, with the
same memory as an uninterrupted one."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest_asyncio
from temporalio.client import WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from vicar import contracts as c
from vicar.memory.chunk import chunk_id_for
from vicar.memory.consolidation import apply_consolidation, memory_fingerprint, plan_consolidation
from vicar.memory.principal import PrincipalMemory
from vicar.memory.registry import MemoryRegistry
from vicar.models import (
    Action,
    AnsweredBy,
    GateRequest,
    OutcomeRecord,
)
from vicar.models.session import JoinReply, SessionConfig, SessionGate, SessionInput, SessionJoin, SessionSummary
from vicar.proxy import facts
from vicar.proxy.outcomes import record_outcome
from vicar.runtime.server import test_server_binary as skipping_server_binary
from vicar.settings import CalibrationParams, Settings

from .conftest import LOOSE_AUTONOMY

ROOT = Path(__file__).resolve().parents[1]

# Two cases, each with an old human answer and one from the session:
#   migrations: "approve" long ago, "correct" now -> preference drift -> DELETE the old one
#   docs: "correct" before and now, in new words -> UPDATE the old one
CASES = {
    "db-migration": (
        "Add a unique index on users.email; rollback drops the index.",
        [(1, "approve", "Fine."), (70, "correct", "From now on every migration needs a down step.")],
    ),
    "docs": (
        "Rewrite the installation guide for Windows users.",
        [(2, "correct", "Add screenshots."), (71, "correct", "Please add screenshots of each step.")],
    ),
}


def seed(memory: PrincipalMemory, principal: str) -> list[str]:
    """Old answers as earlier gates stored them; returns the session gates' workflow ids."""
    session_ids = []
    for task_type, (artifact, answers) in CASES.items():
        for k, (n, action, text) in enumerate(answers):
            wid = f"vicar-gate/{task_type}-{n}"
            req = GateRequest(
                principal=principal,
                gate_id=f"{task_type}-{n}",
                state="PLAN_ASSERT",
                task_type=task_type,
                question="Approve or revise the proposed plan.",
                artifact_text=artifact,
                actor_message="Here is the plan.",
            )
            record_outcome(
                memory,
                OutcomeRecord(
                    request=req,
                    n=n,
                    workflow_id=wid,
                    action=Action(action),
                    response_text=text,
                    answered_by=AnsweredBy.human,
                ),
                artifacts=False,
            )
            if k == 1:
                session_ids.append(wid)
    memory.raise_counter(72)  # docs-71 is one interaction old, db-migration-70 two
    return session_ids


async def open_session(
    client, principal: str, session_id: str, config: SessionConfig, task_queue: str, gate_workflow_ids: list[str]
):
    """What gates do: join (starting the session), then report done."""
    handle = None
    for wid in gate_workflow_ids:
        reply = await client.execute_update_with_start_workflow(
            "join",
            SessionJoin(gate_id=wid.split("/", 1)[1], workflow_id=wid),
            start_workflow_operation=WithStartWorkflowOperation(
                c.SESSION_WORKFLOW,
                SessionInput(principal=principal, session_id=session_id, config=config),
                id=c.session_workflow_id(principal, session_id),
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
            result_type=JoinReply,
        )
        handle = client.get_workflow_handle(c.session_workflow_id(principal, session_id))
        await handle.signal("gate_done", SessionGate(gate_id=wid.split("/", 1)[1], workflow_id=wid))
    return handle, reply


async def summary_when(handle, predicate, timeout=60.0) -> SessionSummary:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        s = await handle.query("summary", result_type=SessionSummary)
        if predicate(s):
            return s
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"session did not get there: {s}")
        await asyncio.sleep(0.2)


@pytest_asyncio.fixture(scope="module")
async def skipping_env():
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=skipping_server_binary(), data_converter=pydantic_data_converter
    )
    yield env
    await env.shutdown()


async def test_idle_timeout_starts_consolidation(skipping_env, embedder, tmp_path):
    from vicar.worker import build_worker

    settings = Settings(data_dir=tmp_path / "vicar", calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY))
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    p = f"p-{uuid.uuid4().hex[:8]}"
    gate_ids = seed(registry.get(p), p)
    config = SessionConfig(idle_timeout_seconds=600, token_budget=60)
    worker, _ = build_worker(skipping_env.client, settings, registry=registry, task_queue="tq-skip")
    async with worker:
        handle, reply = await open_session(skipping_env.client, p, "s1", config, "tq-skip", gate_ids)
        # Working memory: N from the brain's mirror, chunks above tau by activation, cut at the budget.
        assert reply.n == 72 and reply.working_memory
        assert "the human said: Please add screenshots of each step." in reply.working_memory  # the most active
        opened = await handle.query("summary", result_type=SessionSummary)
        assert opened.status == "open" and 0 < opened.working_memory_tokens <= 60
        assert opened.working_memory_chunks < 4  # the budget cut lower-activation chunks
        await skipping_env.sleep(timedelta(seconds=300))
        assert (await handle.query("summary", result_type=SessionSummary)).status == "open"  # not idle yet
        await skipping_env.sleep(timedelta(seconds=400))  # past the 600 s idle timer
        done = await summary_when(handle, lambda s: s.status == "done")
    assert done.ended_by == "idle"
    report = done.consolidation
    assert report.counts == {"DELETE": 1, "UPDATE": 1} and report.applied == 2
    memory = registry.get(p)
    old_migration = memory.store.get_chunk(chunk_id_for(p, "vicar-gate/db-migration-1"))
    assert (old_migration.status, old_migration.superseded_by) == (
        "superseded",
        chunk_id_for(p, "vicar-gate/db-migration-70"),
    )
    updated = memory.store.get_chunk(chunk_id_for(p, "vicar-gate/docs-2"))
    assert updated.human_response == "Please add screenshots of each step." and updated.status == "active"
    registry.close()


async def test_a_killed_consolidation_finishes_once_with_the_same_memory(temporal_env, embedder, tmp_path):
    from vicar.worker import build_worker

    settings = Settings(
        data_dir=tmp_path / "vicar",
        task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY),
    )
    p = f"p-{uuid.uuid4().hex[:8]}"
    memory = PrincipalMemory(p, settings.principals_dir, embedder, settings.memory)
    gate_ids = seed(memory, p)
    # More decisions, so there is a middle to kill in: repeats of the docs answer.
    for i in range(6):
        wid = f"vicar-gate/docs-extra-{i}"
        req = GateRequest(
            principal=p,
            gate_id=f"docs-extra-{i}",
            state="PLAN_ASSERT",
            task_type="docs",
            question="Approve or revise the proposed plan.",
            artifact_text=CASES["docs"][0],
            actor_message="Here is the plan.",
        )
        record_outcome(
            memory,
            OutcomeRecord(
                request=req,
                n=72 + i,
                workflow_id=wid,
                action=Action.correct,
                response_text=f"Screenshots, please (take {i}).",
                answered_by=AnsweredBy.human,
            ),
            artifacts=False,
        )
        gate_ids.append(wid)
    memory.raise_counter(80)
    memory.close()
    # The reference: the same memory consolidated without interruption.
    ref_root = tmp_path / "ref"
    shutil.copytree(settings.principals_dir, ref_root)
    ref = PrincipalMemory(p, ref_root, embedder, settings.memory)
    plan = plan_consolidation(ref, "s1", [chunk_id_for(p, w) for w in gate_ids])
    apply_consolidation(ref, plan)
    ref.close()
    assert len(plan.decisions) == 8

    env = dict(
        os.environ,
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        VICAR_DATA_DIR=str(settings.data_dir),
        VICAR_TASK_QUEUE=settings.task_queue,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.delayed_worker",  # half a second after each decision, so the kill lands mid-plan
        "--step-delay",
        "0.5",
        env=env,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    db = settings.principals_dir / p / "memory.db"

    def applied() -> int:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT COUNT(*) FROM consolidation_log").fetchone()[0]

    try:
        config = SessionConfig(consolidation_heartbeat_seconds=2)
        handle, _ = await open_session(temporal_env.client, p, "s1", config, settings.task_queue, gate_ids)
        await handle.signal("end")
        for _ in range(600):
            if applied() >= 2:
                break
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # mid-apply: no clean shutdown
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    halfway = applied()
    assert 2 <= halfway < 8

    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=settings.task_queue)
    async with worker:
        done = await summary_when(handle, lambda s: s.status == "done", timeout=90)
    assert done.ended_by == "signal" and done.consolidation.applied == 8 - halfway
    # The activity then learns the session's preferences, at the N it is at by then.
    ref = PrincipalMemory(p, ref_root, embedder, settings.memory)
    ref.raise_counter(registry.get(p).counter())
    assert len(facts.after_consolidation(ref, plan, settings.facts)) == done.consolidation.facts_learned == 3
    expected = memory_fingerprint(ref)
    ref.close()
    assert memory_fingerprint(registry.get(p)) == expected
    assert applied() == 8  # every decision logged once
    registry.close()


async def test_session_commands_show_and_end_a_session(harness, monkeypatch, temporal_env, settings):
    from typer.testing import CliRunner

    from vicar.cli import app
    from vicar.client.gates import start_gate

    h = harness
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    p = h.principal()
    req = h.request(p, escalation_mode="never", session_id="morning")
    result = await (await start_gate(h.client, req, h.task_queue)).result()
    assert not result.escalated
    run = CliRunner()
    shown = await asyncio.to_thread(run.invoke, app, ["session", "show", p, "morning"])
    assert shown.exit_code == 0, shown.output
    assert f"session morning of {p}: open" in shown.output and "gates: 1 (1 done)" in shown.output
    ended = await asyncio.to_thread(run.invoke, app, ["session", "end", p, "morning"])
    assert ended.exit_code == 0 and "consolidation starts" in ended.output
    handle = h.client.get_workflow_handle(c.session_workflow_id(p, "morning"))
    done = await summary_when(handle, lambda s: s.status == "done")
    assert done.ended_by == "signal" and done.consolidation.counts == {}  # a proxy answer is not consolidated
    missing = await asyncio.to_thread(run.invoke, app, ["session", "show", p, "evening"])
    assert missing.exit_code == 3 and "no session 'evening'" in missing.output


async def test_a_gate_for_an_ended_session_still_runs(harness):
    from vicar.client.gates import start_gate

    h = harness
    p = h.principal()
    first = await (
        await start_gate(h.client, h.request(p, escalation_mode="never", session_id="over"), h.task_queue)
    ).result()
    session = h.client.get_workflow_handle(c.session_workflow_id(p, "over"))
    await session.signal("end")
    await summary_when(session, lambda s: s.status != "open")
    late = h.request(p, escalation_mode="never", session_id="over")
    result = await asyncio.wait_for((await start_gate(h.client, late, h.task_queue)).result(), timeout=30)
    assert not first.escalated and result.answered_by is AnsweredBy.proxy
    done = await summary_when(session, lambda s: s.status == "done")
    assert [g.gate_id for g in done.gates] == [first.gate_id]  # the late gate did not join
