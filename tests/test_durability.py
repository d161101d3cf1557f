"""An answer confirmed to Temporal survives a power loss (issue 24, item 3).

The power loss is an ext4 filesystem on a loop device aborted with
`mount -o remount,abort` right after the answer is recorded: nothing the kernel has not
yet written reaches the disk, as when the power goes. Then fsck, mount again, and the
record must be there. Needs root and a loop device; skipped with the reason elsewhere,
where the pragma test below still checks that commits wait for the disk.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.memory.diskfull import DiskFull
from vicar.memory.params import MemoryParams
from vicar.memory.principal import PrincipalMemory
from vicar.memory.store import RecordStore
from vicar.models import GateRequest, HumanAnswer

from .conftest import let_test_responders_in, record_answer, wait_escalated, wait_for
from .test_broken_store import wait_proxy_error

ROOT = Path(__file__).resolve().parents[1]
# SQLite's numbers for PRAGMA synchronous.
FULL, NORMAL, OFF = 2, 1, 0


def test_record_store_commits_wait_for_the_disk(tmp_path):
    """The pragma in force on an open store's connection, in WAL mode: FULL (NORMAL lost
    recorded answers on power loss)."""
    store = RecordStore(tmp_path / "memory.db")
    try:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == FULL
    finally:
        store.close()
    throwaway = RecordStore(tmp_path / "scratch.db", durable=False)
    try:
        assert throwaway._db.execute("PRAGMA synchronous").fetchone()[0] == OFF
    finally:
        throwaway.close()


def test_principal_memory_store_is_durable(tmp_path, embedder):
    """The store a worker's memory opens (the one record_outcome writes) is the durable one."""
    mem = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        assert mem.store._db.execute("PRAGMA synchronous").fetchone()[0] == FULL
    finally:
        mem.close()


# -- power loss on a loop device -------------------------------------------------------


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)


class LoopFs:
    """An ext4 filesystem in a file, on a loop device, mounted at `mnt`."""

    def __init__(self, base: Path) -> None:
        self.image = base / "disk.img"
        self.mnt = base / "mnt"
        self.mnt.mkdir()
        with open(self.image, "wb") as f:
            f.truncate(256 * 1024 * 1024)
        _run("mkfs.ext4", "-q", "-F", str(self.image))
        self.device = _run("losetup", "-f", "--show", str(self.image)).stdout.strip()
        self.mount()

    def mount(self) -> None:
        _run("mount", "-t", "ext4", self.device, str(self.mnt))

    def power_loss(self) -> None:
        """Whatever is not on the disk now never will be: the journal stops, writeback fails."""
        _run("mount", "-o", "remount,abort", str(self.mnt))

    def unmount(self) -> None:
        _run("umount", str(self.mnt))

    def fsck(self) -> str:
        # 0: clean, 1: errors corrected (an aborted journal leaves some); more is a failure.
        done = _run("e2fsck", "-fy", self.device, check=False)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return done.stdout

    def close(self) -> None:
        if os.path.ismount(self.mnt):
            if _run("umount", str(self.mnt), check=False).returncode:
                _run("umount", "-l", str(self.mnt), check=False)
        _run("losetup", "-d", self.device, check=False)


def _loop_unavailable() -> str | None:
    if os.geteuid() != 0:
        return f"mounting a loop device needs root (uid {os.geteuid()})"
    for tool in ("losetup", "mkfs.ext4", "e2fsck", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    free = _run("losetup", "-f", check=False)
    if free.returncode:
        return f"no free loop device: `losetup -f` says {(free.stderr or free.stdout).strip()!r}"
    return None


@pytest.fixture
def loopfs(tmp_path):
    reason = _loop_unavailable()
    if reason:
        pytest.skip(f"power-loss test needs an ext4 loop mount: {reason}")
    try:
        fs = LoopFs(tmp_path)
    except subprocess.CalledProcessError as exc:
        pytest.skip(
            f"power-loss test needs an ext4 loop mount: {' '.join(exc.cmd)} failed: {(exc.stderr or '').strip()}"
        )
    try:
        yield fs
    finally:
        fs.close()


# A process that records answers the way the record_outcome activity does, says so and
# then waits (its writes as unflushed as a worker's) until the power goes.
RECORDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from vicar.memory.embedder import default_embedder
    from vicar.memory.principal import PrincipalMemory
    from vicar.memory.params import MemoryParams
    from vicar.models import GateRequest
    from tests.conftest import record_answer

    mem = PrincipalMemory("alice", Path(sys.argv[1]), default_embedder(), MemoryParams())
    print("open", flush=True)
    for i in range(1, int(sys.argv[2]) + 1):
        req = GateRequest(principal="alice", gate_id=f"power-{i}", state="PLAN_ASSERT", task_type="docs",
                          question=f"Approve change {i}?", artifact_text=f"Change {i}.")
        record_answer(mem, req, i, "correct", f"answer {i}: add a rollback step")
    print("recorded", flush=True)
    time.sleep(600)
""")


def _recorded(db: Path) -> dict[str, str]:
    """workflow id -> action of every outcome in the store, read after the power came back."""
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT workflow_id, action FROM outcomes").fetchall())
    finally:
        con.close()


def _after_power_loss(fs: LoopFs, proc: subprocess.Popen | None = None) -> None:
    fs.power_loss()
    if proc is not None:
        proc.send_signal(signal.SIGKILL)  # the machine is gone: the process never gets to close
        proc.wait(timeout=30)
    fs.unmount()
    fs.fsck()
    fs.mount()


def test_recorded_answers_survive_power_loss(loopfs):
    root = loopfs.mnt / "principals"
    n = 3
    proc = subprocess.Popen(
        [sys.executable, "-c", RECORDER, str(root), str(n)],
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "open"
        assert proc.stdout.readline().strip() == "recorded"
        _after_power_loss(loopfs, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recorded = _recorded(root / "alice" / "memory.db")
    assert recorded == {f"vicar-gate/power-{i}": "correct" for i in range(1, n + 1)}, recorded


async def test_answered_gate_survives_power_loss(loopfs, temporal_env):
    """A real gate on a real worker whose data dir is on the loop device: answered,
    Completed, then the power goes. The answer must be in the memory after fsck."""
    data = loopfs.mnt / "vicar"
    queue = f"tq-power-{uuid.uuid4().hex[:8]}"
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        VICAR_DATA_DIR=str(data),
        VICAR_TASK_QUEUE=queue,
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "vicar.worker"],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    principal = "powerloss"
    let_test_responders_in(data / "principals", principal)
    try:
        req = GateRequest(
            principal=principal,
            gate_id=f"power-{uuid.uuid4().hex[:8]}",
            state="PLAN_ASSERT",
            task_type="db-migration",
            question="Approve or revise the proposed plan.",
            artifact_text="Drop the legacy table.",
            escalation_mode="always",
        )
        handle = await start_gate(temporal_env.client, req, queue)
        await asyncio.wait_for(wait_escalated_long(temporal_env.client, req.gate_id), timeout=120)
        await answer_gate(
            temporal_env.client,
            req.gate_id,
            HumanAnswer(action="reject", text="Never drop it; archive first.", responder="tester"),
        )
        result = await asyncio.wait_for(handle.result(), timeout=60)
        assert result.answered_by.value == "human" and result.action.value == "reject"
        # Completed: Temporal is done with the answer. Now the power goes.
        await asyncio.to_thread(_after_power_loss, loopfs, worker)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    recorded = _recorded(data / "principals" / principal / "memory.db")
    assert recorded.get(handle.id) == "reject", recorded


async def wait_escalated_long(client, gate_id: str):
    """The worker loads the embedding model first: the first gate takes a while to escalate."""
    while True:
        try:
            return await wait_escalated(client, gate_id)
        except TimeoutError:
            continue


# -- a full disk is said as such -----------------------------------------------------------


class SmallDisk:
    """A small tmpfs that can be filled to the last byte and emptied again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as f:
            for block in (1 << 20, 1 << 12):
                try:
                    while True:
                        f.write(b"\0" * block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
        assert shutil.disk_usage(self.path).free < 4096

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip(f"a small tmpfs to fill needs root to mount (uid {os.geteuid()})")
    path = tmp_path / "disk"
    path.mkdir()
    done = _run("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(path), check=False)
    if done.returncode:
        pytest.skip(f"mount -t tmpfs refused here: {done.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        if _run("umount", str(path), check=False).returncode:
            _run("umount", "-l", str(path), check=False)


@pytest.fixture
def settings(small_disk):
    """The harness's data dir on the small disk."""
    from vicar.settings import CalibrationParams, Settings

    from .conftest import LOOSE_AUTONOMY

    return Settings(data_dir=small_disk.path / "vicar", calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY))


def test_new_principal_on_a_full_disk_is_told_the_disk_is_full(small_disk, embedder):
    """It was told its memory "is in use by another process": the lock file's write failed
    and the lock stayed held by a descriptor nobody closed."""
    root = small_disk.path / "principals"
    small_disk.fill()
    for _ in range(2):  # the second attempt is not refused as locked
        with pytest.raises(DiskFull, match="the disk is full") as err:
            PrincipalMemory("newcomer", root, embedder, MemoryParams())
        assert str(root / "newcomer") in str(err.value) and "in use" not in str(err.value)
    small_disk.free()
    PrincipalMemory("newcomer", root, embedder, MemoryParams()).close()


async def test_gate_of_a_new_principal_on_a_full_disk_says_so(harness, small_disk):
    h = harness
    small_disk.fill()
    req = h.request(h.principal(responders=None))  # new: nothing of it on the disk yet
    await start_gate(h.client, req, h.task_queue)
    d = await wait_proxy_error(h.client, req.gate_id)
    assert "the disk is full" in d.calibration_note and str(h.settings.principals_dir) in d.calibration_note, d
    assert "in use" not in d.calibration_note


async def test_answer_on_a_full_disk_waits_saying_so_and_lands_once_there_is_room(harness, small_disk, caplog):
    h = harness
    p = h.principal()
    first = await asyncio.wait_for(
        (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(), timeout=60
    )
    req = h.request(p, escalation_mode="always", artifact="Rename the column.")
    handle = await start_gate(h.client, req, h.task_queue)
    await asyncio.wait_for(wait_escalated_long(h.client, req.gate_id), timeout=60)
    small_disk.fill()
    caplog.set_level("WARNING")
    await answer_gate(
        h.client, req.gate_id, HumanAnswer(action="correct", text="Keep the old name.", responder="tester")
    )

    async def said() -> bool:
        return any("recording waits" in r.getMessage() and "the disk is full" in r.getMessage() for r in caplog.records)

    await wait_for(said, timeout=60)
    # What the gate shows while its record waits: the answer is in, the disk is the cause.
    waiting = await gate_details(h.client, req.gate_id)
    assert waiting.calibration_note.startswith("answered by tester; recording waits: "), waiting
    assert "the disk is full" in waiting.calibration_note, waiting
    small_disk.free()
    result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result.answered_by.value == "human" and result.n == first.n + 1
    assert "recording waits" not in result.calibration_note, result
    mem = h.registry.get(p)
    assert mem.store.outcome_seq(handle.id) is not None and mem.store.count("answered_by = 'human'") == 1


def test_check_on_a_full_disk_says_disk_full_not_broken(small_disk, embedder, monkeypatch):
    from typer.testing import CliRunner

    from vicar.cli import app

    root = small_disk.path / "vicar" / "principals"
    mem = PrincipalMemory("alice", root, embedder, MemoryParams())
    req = GateRequest(principal="alice", gate_id="full-1", state="PLAN_ASSERT", task_type="docs", question="Ok?")
    record_answer(mem, req, 1, "approve", "fine")
    mem.close()
    small_disk.fill()
    monkeypatch.setenv("VICAR_DATA_DIR", str(small_disk.path / "vicar"))
    out = CliRunner().invoke(app, ["memory", "check", "alice"])
    assert out.exit_code == DiskFull.exit_code, out.output
    assert "DISK FULL" in out.output and "the disk is full" in out.output and "records intact" in out.output
    assert "BROKEN" not in out.output and "repair" not in out.output.replace("no repair needed", ""), out.output


async def test_embedded_server_keeps_a_completed_gate_through_power_loss(loopfs, embedder, tmp_path):
    """The embedded Temporal server's SQLite file (vicar/runtime/server.py) on the aborted disk: under
    synchronous=normal a gate the client saw Completed came back RUNNING after fsck (2 of 2
    runs), its answer already in the memory: the person could be asked again, and a second
    answer would reach the orchestrator but not the memory."""
    from temporalio.client import Client, WorkflowExecutionStatus
    from temporalio.contrib.pydantic import pydantic_data_converter

    from vicar.memory.registry import MemoryRegistry
    from vicar.runtime.server import EmbeddedServer, free_port
    from vicar.settings import Settings
    from vicar.worker import build_worker

    def server() -> EmbeddedServer:
        return EmbeddedServer(loopfs.mnt / "vicar", port=free_port(), ui_port=free_port())

    first = await asyncio.to_thread(server().start)
    settings = Settings(data_dir=tmp_path / "worker")  # the memory's durability is tested above
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    try:
        client = await Client.connect(first.address, data_converter=pydantic_data_converter)
        worker, _ = build_worker(client, settings, registry=registry, task_queue="tq-embedded-power")
        async with worker:
            let_test_responders_in(settings.principals_dir, "embedded")
            req = GateRequest(
                principal="embedded",
                gate_id=f"power-{uuid.uuid4().hex[:8]}",
                state="PLAN_ASSERT",
                task_type="docs",
                question="Ship it?",
                escalation_mode="always",
            )
            handle = await start_gate(client, req, "tq-embedded-power")
            await asyncio.wait_for(wait_escalated_long(client, req.gate_id), timeout=60)
            await answer_gate(client, req.gate_id, HumanAnswer(action="reject", text="Not yet.", responder="tester"))
            assert (await asyncio.wait_for(handle.result(), timeout=60)).action.value == "reject"
            loopfs.power_loss()
            os.kill(first.pid, signal.SIGKILL)
            await asyncio.to_thread(first.stop)
    finally:
        await asyncio.to_thread(first.stop)
    loopfs.unmount()
    loopfs.fsck()
    loopfs.mount()
    again = await asyncio.to_thread(server().start)
    try:
        client = await Client.connect(again.address, data_converter=pydantic_data_converter)
        status = (await client.get_workflow_handle(handle.id).describe()).status
        assert status is WorkflowExecutionStatus.COMPLETED, status
        assert registry.get("embedded").store.outcome_seq(handle.id) is not None
    finally:
        registry.close()
        await asyncio.to_thread(again.stop)
