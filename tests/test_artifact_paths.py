"""Artifacts by reference are read only under the configured roots: at `vicar gate
start` and in the worker (a refused path sends the gate to the human with the reason),
never a FIFO, never through a symlink or `..` out of a root."""

from __future__ import annotations

import asyncio
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vicar.artifacts import load_artifact
from vicar.cli import app
from vicar.client.gates import answer_gate, start_gate
from vicar.errors import ArtifactRefused
from vicar.models import GateRequest, HumanAnswer

from .conftest import wait_escalated
from .test_bad_input import cli_env, error_line, gate_exists, runner  # noqa: F401 (fixture)
from .test_llm_gate import Reviewer, kind_of, llm, standin  # noqa: F401 (fixtures)

PASSWD = Path("/etc/passwd")


def passwd_lines() -> list[str]:
    return [line for line in PASSWD.read_text().splitlines() if len(line) > 10]


@pytest.fixture
def root(tmp_path) -> Path:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    return allowed


def gate_start_args(gid: str, *paths: str) -> list[str]:
    args = [
        "gate",
        "start",
        "--principal",
        "alice",
        "--gate-id",
        gid,
        "--state",
        "PLAN_ASSERT",
        "--task-type",
        "docs",
        "--question",
        "Approve?",
    ]
    for p in paths:
        args += ["--artifact-path", p]
    return args


async def test_gate_start_refuses_paths_outside_the_roots(cli_env, temporal_env, monkeypatch, root):
    gid = f"g-{uuid.uuid4().hex[:8]}"
    monkeypatch.delenv("VICAR_ARTIFACT_ROOTS", raising=False)
    result = await asyncio.to_thread(runner.invoke, app, gate_start_args(gid, str(PASSWD)))
    assert result.exit_code == 2
    line = error_line(result)
    assert "'/etc/passwd'" in line and "no artifact roots are configured" in line and "VICAR_ARTIFACT_ROOTS" in line

    monkeypatch.setenv("VICAR_ARTIFACT_ROOTS", str(root))
    for path in (str(PASSWD), f"{root}/../../../../etc/passwd"):
        result = await asyncio.to_thread(runner.invoke, app, gate_start_args(gid, path))
        assert result.exit_code == 2
        line = error_line(result)
        assert f"{path!r} is outside the artifact roots" in line, line
        assert f"roots {root}" not in line and "resolves to" not in line, line  # the details are not shown
        assert "add its directory to VICAR_ARTIFACT_ROOTS" in line
    assert not await gate_exists(temporal_env.client, gid)


def test_load_artifact_reads_a_regular_file_inside_a_root(root, settings):
    (root / "plan.md").write_text("Add the index CONCURRENTLY.\n" + "x" * 50)
    settings.artifact_roots = [root]
    settings.limits.artifact_file_bytes = 40  # the cap: only the first 40 bytes are read
    req = GateRequest(
        principal="alice",
        gate_id="g1",
        state="PLAN_ASSERT",
        task_type="docs",
        question="Ok?",
        artifact_text="inline",
        artifact_paths=[str(root / "sub" / ".." / "plan.md")],
    )
    text = load_artifact(req, settings)
    assert text == f"inline\n--- {root}/sub/../plan.md\nAdd the index CONCURRENTLY.\n" + "x" * 12


def test_symlinks_dotdot_fifos_and_directories_are_refused(root, tmp_path, settings):
    settings.artifact_roots = [root]
    outside = tmp_path / "secret.txt"
    outside.write_text("the secret")
    (root / "link").symlink_to(outside)
    (root / "etc").symlink_to("/etc")
    os.mkfifo(root / "pipe")
    (root / "dir").mkdir()

    def refused(path: str, detail: bool = False) -> str:
        req = GateRequest(
            principal="alice",
            gate_id="g1",
            state="PLAN_ASSERT",
            task_type="docs",
            question="Ok?",
            artifact_paths=[path],
        )
        with pytest.raises(ArtifactRefused) as info:
            load_artifact(req, settings)
        return info.value.detail if detail else str(info.value)

    # Where a symlink leads is for the worker's log (`detail`), not the refusal's text.
    said = refused(str(root / "link"))
    assert "outside the artifact roots" in said and str(outside) not in said
    assert f"resolves to '{outside}'" in refused(str(root / "link"), detail=True)
    assert "resolves to '/etc/passwd'" in refused(str(root / "etc" / "passwd"), detail=True)
    assert "outside the artifact roots" in refused(f"{root}/../secret.txt")
    assert "outside the artifact roots" in refused("/etc/passwd")
    assert "is not a regular file" in refused(str(root / "dir"))
    assert "cannot be opened: No such file or directory" in refused(str(root / "missing.txt"))
    assert "not a valid path" in refused(f"{root}/a\x00b")
    # A FIFO with no writer: opened without blocking and refused, in a thread with a
    # timeout so a regression fails instead of hanging the suite.
    pool = ThreadPoolExecutor(1)
    try:
        assert "is not a regular file" in pool.submit(refused, str(root / "pipe")).result(timeout=10)
    finally:
        pool.shutdown(wait=False)


async def test_a_refused_path_sends_the_gate_to_the_human_with_the_reason(harness, root):
    h = harness
    h.settings.artifact_roots = [root]
    os.mkfifo(root / "pipe")
    for path, reason in ((str(PASSWD), "is outside the artifact roots"), (str(root / "pipe"), "is not a regular file")):
        p = h.principal()
        req = h.request(p, artifact_paths=[path])
        handle = await start_gate(h.client, req, h.task_queue)  # straight to the worker, no CLI check
        details = await wait_escalated(h.client, req.gate_id)  # times out rather than hang
        assert details.calibration_guard == "proxy_error"
        assert reason in details.calibration_note and repr(path) in details.calibration_note
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="hold", text="Send it inline.", responder="tester"))
        result = await handle.result()
        assert result.calibration_guard == "proxy_error" and result.escalated
        shown = details.model_dump_json() + result.model_dump_json()
        assert not any(line in shown for line in passwd_lines())


async def test_with_an_llm_predictor_nothing_outside_the_roots_reaches_the_provider(llm, standin, root):
    standin._script = Reviewer(first="Approved, the plan is sound.\nCONFIDENCE: 0.9")
    llm.settings.artifact_roots = [root]
    marker = f"marker-{uuid.uuid4().hex}"
    (root / "plan.md").write_text(f"Build the index concurrently ({marker}).")

    refused = llm.request(llm.principal(), artifact_paths=[str(PASSWD)], escalation_mode="never")
    handle = await start_gate(llm.client, refused, llm.task_queue)
    details = await wait_escalated(llm.client, refused.gate_id)  # even `never` goes to the human
    assert details.calibration_guard == "proxy_error" and "'/etc/passwd'" in details.calibration_note
    sent = str(standin.bodies())
    assert not any(line in sent for line in passwd_lines())
    await handle.terminate()

    # A regular file inside the root is read: its content reaches the posterior pass.
    allowed = llm.request(llm.principal(), artifact_paths=[str(root / "plan.md")], escalation_mode="never")
    result = await (await start_gate(llm.client, allowed, llm.task_queue)).result()
    assert result.calibration_guard != "proxy_error"
    posteriors = [b for b in standin.bodies() if kind_of(b) == "pass" and "<<<BEGIN ARTIFACT" in str(b)]
    assert posteriors and all(marker in str(b) for b in posteriors)
