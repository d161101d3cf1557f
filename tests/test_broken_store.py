"""A broken store fails its principal's gates loudly and alone; lost vectors are rebuilt;
`vicar memory check` / `repair`; one process per principal memory."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.memory.check import check, repair
from vicar.memory.chunk import MemoryChunk
from vicar.memory.owner import StoreLocked
from vicar.memory.principal import PrincipalMemory
from vicar.memory.retrieval import Query
from vicar.memory.store import RecordsUnusable
from vicar.memory.vectors import VectorsUnusable
from vicar.models import GateStatus, HumanAnswer

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[1]
JUNK = b"this is not a database " * 1000
runner = CliRunner()


def junk(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(JUNK)


def remove_store(directory: Path) -> None:
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        (directory / name).unlink(missing_ok=True)


async def wait_proxy_error(client, gate_id: str, timeout: float = 30.0):
    async def escalated():
        d = await gate_details(client, gate_id)
        return d if d and d.status is GateStatus.escalated else None

    d = await wait_for(escalated, timeout=timeout)
    assert d.calibration_guard == "proxy_error", d
    return d


def chunk(principal: str, i: int) -> MemoryChunk:
    return MemoryChunk(
        id=f"c{i}",
        principal=principal,
        state="PLAN_ASSERT",
        task_type="docs",
        outcome="approve",
        answered_by="human",
        question=f"Approve doc change {i}?",
        artifact_excerpt=f"Change {i}.",
        human_response=f"ok {i}",
        created_n=i,
        traces=[i],
    )


async def broken_principal_escalates_and_recovers(h, break_store, fix_store, reason: str):
    a, b = h.principal(), h.principal()
    adir = h.settings.principals_dir / a
    break_store(adir)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    reqa = h.request(a)
    ga = await start_gate(h.client, reqa, h.task_queue)
    gb = [
        await start_gate(h.client, h.request(b, escalation_mode="never", artifact=f"change {i}"), h.task_queue)
        for i in range(3)
    ]
    d = await wait_proxy_error(h.client, reqa.gate_id)
    assert loop.time() - t0 < 30
    assert reason in d.calibration_note and "memory unavailable" in d.calibration_note
    # The other principal on the same worker is not held up.
    results = await asyncio.wait_for(asyncio.gather(*(g.result() for g in gb)), timeout=60)
    assert sorted(r.n for r in results) == [1, 2, 3] and all(r.answered_by.value == "proxy" for r in results)

    # The human answers while the memory is still broken: the answer is kept ...
    await answer_gate(
        h.client, d.gate_id, HumanAnswer(action="correct", text="Add a rollback step.", responder="tester")
    )
    await asyncio.sleep(1.5)
    details = await gate_details(h.client, d.gate_id)
    assert details is not None and details.status is GateStatus.queued  # waiting to record
    await asyncio.to_thread(fix_store, adir)
    # ... and recorded once the memory is repaired.
    result = await asyncio.wait_for(ga.result(), timeout=90)
    assert result.answered_by.value == "human" and result.action.value == "correct" and result.n >= 1
    mem = h.registry.get(a)
    assert mem.store.outcome_seq(ga.id) is not None
    # The principal's next gate proceeds normally: a turn, an N, the proxy consulted.
    nxt = await asyncio.wait_for(
        (await start_gate(h.client, h.request(a, escalation_mode="never"), h.task_queue)).result(), timeout=60
    )
    assert nxt.n == result.n + 1 and nxt.calibration_guard != "proxy_error"
    assert mem.store.count() == 2


async def test_junk_memory_db_escalates_alone_and_recovers(harness):
    await broken_principal_escalates_and_recovers(
        harness, lambda d: junk(d / "memory.db"), remove_store, "file is not a database"
    )


async def test_junk_chroma_escalates_alone_and_recovers(harness):
    h = harness

    def fix(directory: Path) -> None:
        # The real repair: the broken vector store is moved aside and rebuilt from the records.
        retry_locked(lambda: repair(h.settings.principals_dir, directory.name, h.registry._embedder_factory()))
        assert list(directory.glob("chroma.broken-*"))

    await broken_principal_escalates_and_recovers(
        h, lambda d: junk(d / "chroma" / "chroma.sqlite3"), fix, "chroma.sqlite3"
    )


def retry_locked(fn, attempts: int = 50):
    """The worker retries opening the broken memory now and then (taking its lock for a
    moment): a repair that meets it is refused and tried again."""
    import time

    for _ in range(attempts):
        try:
            return fn()
        except StoreLocked:
            time.sleep(0.1)
    raise AssertionError("the memory stayed locked")


async def test_store_corrupted_under_a_running_worker(harness):
    """Gates first, then the store breaks and the registry reopens it: refused, not queued."""
    h = harness
    p = h.principal()
    first = await asyncio.wait_for(
        (await start_gate(h.client, h.request(p, escalation_mode="never"), h.task_queue)).result(), timeout=60
    )
    h.registry.close()
    directory = h.settings.principals_dir / p
    remove_store(directory)
    junk(directory / "memory.db")
    req = h.request(p, escalation_mode="never")
    await start_gate(h.client, req, h.task_queue)
    d = await wait_proxy_error(h.client, req.gate_id)
    assert "file is not a database" in d.calibration_note and first.n == 1


def test_deleted_chroma_is_rebuilt_on_open(settings, embedder):
    root = settings.principals_dir
    mem = PrincipalMemory("alice", root, embedder, settings.memory)
    for i in range(1, 7):
        mem.record(chunk("alice", i))
    expected = mem.vectors.count()
    mem.close()
    shutil.rmtree(root / "alice" / "chroma")
    mem = PrincipalMemory("alice", root, embedder, settings.memory)
    try:
        assert mem.rebuilt_on_open is not None and mem.rebuilt_on_open.missing_vectors == 6
        assert mem.chunks_without_vectors() == 0 and mem.vectors.count() == expected
        for i in range(1, 7):
            assert all(
                mem.index.has_vector(f"c{i}", d) for d in chunk("alice", i).vector_texts(mem.params.blended_vectors)
            )
        hits = mem.retrieve(Query(now=8, texts={"situation": "PLAN_ASSERT docs: Approve doc change 4?"}))
        sims = {h.chunk_id: h.similarity for h, _ in hits}
        assert sims["c4"] == pytest.approx(1.0, abs=1e-5) and max(sims, key=sims.get) == "c4"
    finally:
        mem.close()
    assert check(root, "alice").healthy  # the vectors are on disk, not only in the index
    again = PrincipalMemory("alice", root, embedder, settings.memory)
    assert again.rebuilt_on_open is None  # nothing to rebuild the second time
    again.close()


def test_corrupt_chroma_is_a_store_error_naming_the_file(settings, embedder):
    root = settings.principals_dir
    PrincipalMemory("alice", root, embedder, settings.memory).close()
    junk(root / "alice" / "chroma" / "chroma.sqlite3")
    with pytest.raises(VectorsUnusable, match=r"chroma\.sqlite3.*vicar memory repair alice"):
        PrincipalMemory("alice", root, embedder, settings.memory)
    # A failed open holds nothing: the lock is free for the repair.
    report = repair(root, "alice", embedder, settings.memory)
    assert report.moved_aside and Path(report.moved_aside).name.startswith("chroma.broken-")


def cli(settings, monkeypatch, *args):
    monkeypatch.setenv("VICAR_DATA_DIR", str(settings.data_dir))
    result = runner.invoke(app, ["memory", *args])
    assert "Traceback" not in result.output
    return result


def test_memory_check_and_repair(settings, embedder, monkeypatch):
    root = settings.principals_dir
    mem = PrincipalMemory("alice", root, embedder, settings.memory)
    for i in range(1, 7):
        mem.record(chunk("alice", i))
    mem.close()
    ok = cli(settings, monkeypatch, "check", "alice")
    assert ok.exit_code == 0 and "alice: healthy" in ok.output and "6 records" in ok.output, ok.output

    shutil.rmtree(root / "alice" / "chroma")  # lost vectors
    lost = cli(settings, monkeypatch, "check", "alice")
    assert lost.exit_code == 6 and "6 of 6 chunks lack vectors" in lost.output, lost.output
    fixed = cli(settings, monkeypatch, "repair", "alice")
    assert fixed.exit_code == 0 and "vectors of 6 of 6 chunks rebuilt" in fixed.output, fixed.output
    assert cli(settings, monkeypatch, "check", "alice").exit_code == 0

    junk(root / "alice" / "chroma" / "chroma.sqlite3")  # corrupt vectors
    bad = cli(settings, monkeypatch, "check", "alice")
    assert bad.exit_code == 6 and "chroma.sqlite3" in bad.output and "BROKEN" in bad.output, bad.output
    fixed = cli(settings, monkeypatch, "repair", "alice")
    assert fixed.exit_code == 0 and "moved to" in fixed.output and "6 of 6" in fixed.output, fixed.output
    assert cli(settings, monkeypatch, "check", "alice").exit_code == 0
    mem = PrincipalMemory("alice", root, embedder, settings.memory)
    assert mem.rebuilt_on_open is None and mem.retrieve(Query(now=8, texts={"situation": "Approve doc change 2?"}))
    mem.close()

    remove_store(root / "alice")
    junk(root / "alice" / "memory.db")  # corrupt records: nothing to rebuild them from
    bad = cli(settings, monkeypatch, "check", "alice")
    assert bad.exit_code == 6 and "file is not a database" in bad.output, bad.output
    refused = cli(settings, monkeypatch, "repair", "alice")
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert refused.exit_code == 6 and len(lines) == 1 and "cannot be rebuilt from the vectors" in lines[0], lines
    with pytest.raises(RecordsUnusable):
        repair(root, "alice", embedder)
    stats = cli(settings, monkeypatch, "stats", "alice")
    assert stats.exit_code == 6 and "file is not a database" in stats.output


async def test_a_second_process_is_refused_with_the_holder(settings, embedder, monkeypatch):
    root = settings.principals_dir
    PrincipalMemory("alice", root, embedder, settings.memory).close()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests" / "memory_holder.py"),
        str(root),
        "alice",
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).strip() == b"open"
        with pytest.raises(StoreLocked, match=rf"in use by pid {proc.pid} .*memory_holder\.py"):
            PrincipalMemory("alice", root, embedder, settings.memory)
        with pytest.raises(StoreLocked, match=f"pid {proc.pid}"):
            repair(root, "alice", embedder)
        refused = cli(settings, monkeypatch, "repair", "alice")
        assert refused.exit_code == 5 and f"pid {proc.pid}" in refused.output
        # Read-only commands need no lock.
        checked = cli(settings, monkeypatch, "check", "alice")
        assert checked.exit_code == 0 and f"open in pid {proc.pid}" in checked.output, checked.output
        assert cli(settings, monkeypatch, "stats", "alice").exit_code == 0
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # The kernel dropped the lock with the process.
    PrincipalMemory("alice", root, embedder, settings.memory).close()


async def test_worker_with_a_broken_store_stops_on_sigterm(temporal_env, settings, worker_process):
    """Regression: local activities retried for ever on a corrupt store, and the worker's
    shutdown waited for them."""
    p = "wkr-broken"
    junk(settings.principals_dir / p / "memory.db")
    worker = worker_process(settings.data_dir)
    await worker.start()
    try:
        req = harness_request(p)
        await start_gate(temporal_env.client, req, worker.task_queue)
        await wait_proxy_error(temporal_env.client, req.gate_id, timeout=90)
    finally:
        out = await worker.stop(timeout=60)
    assert worker.proc is not None and worker.proc.returncode == 0, out[-2000:]


def harness_request(principal: str):
    from vicar.models import GateRequest

    return GateRequest(
        principal=principal,
        gate_id=f"broken-{os.getpid()}-{os.urandom(3).hex()}",
        state="WORK_ASSERT",
        task_type="docs",
        question="Approve?",
    )


# -- `vicar memory check` reads only ---------------------------------------------------


def digests(directory: Path) -> dict[str, str]:
    """md5 of every file under a principal's folder (the set of files included)."""
    import hashlib

    return {
        str(p.relative_to(directory)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def memory_of_six(settings, embedder) -> Path:
    root = settings.principals_dir
    mem = PrincipalMemory("alice", root, embedder, settings.memory)
    for i in range(1, 7):
        mem.record(chunk("alice", i))
    mem.close()
    return root / "alice"


async def test_check_writes_nothing(settings, embedder, monkeypatch):
    """A check changed the store (md5 of memory.db, new -wal/-shm files, Chroma's tables):
    it must read only, with the memory closed and while a worker holds it open."""
    directory = memory_of_six(settings, embedder)
    before = digests(directory)
    ok = cli(settings, monkeypatch, "check", "alice")
    assert ok.exit_code == 0 and "6 records" in ok.output, ok.output
    assert digests(directory) == before

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests" / "memory_holder.py"),
        str(settings.principals_dir),
        "alice",
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).strip() == b"open"
        held = digests(directory)  # the holder's own files (its -wal, -shm, lock)
        ok = cli(settings, monkeypatch, "check", "alice")
        assert ok.exit_code == 0 and f"open in pid {proc.pid}" in ok.output, ok.output
        assert digests(directory) == held
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()


@pytest.fixture
def read_only_view(tmp_path):
    """A read-only bind mount of a folder: what root cannot write either."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip(
            f"a read-only bind mount needs root (uid {os.geteuid()}); test_check_writes_nothing "
            f"covers the read-only open"
        )
    mounts: list[Path] = []

    def view(source: Path) -> Path:
        target = tmp_path / f"ro-{len(mounts)}"
        target.mkdir()
        for cmd in (["mount", "--bind", str(source), str(target)], ["mount", "-o", "remount,bind,ro", str(target)]):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                if os.path.ismount(target):
                    subprocess.run(["umount", str(target)])
                pytest.skip(f"read-only bind mount refused here: {' '.join(cmd)}: {done.stderr.strip()}")
        mounts.append(target)
        return target

    yield view
    for target in mounts:
        subprocess.run(["umount", str(target)], capture_output=True)


def test_check_on_a_read_only_filesystem(settings, embedder, read_only_view):
    """Checking a backup on a read-only mount failed with "attempt to write a readonly database"."""
    directory = memory_of_six(settings, embedder)
    before = digests(directory)
    ro = read_only_view(settings.principals_dir)
    with pytest.raises(OSError):
        (ro / "alice" / "probe").write_text("x")  # really read-only, even for root
    report = check(ro, "alice")
    assert report.healthy and report.records == 6, report.problems
    assert sum(report.vectors_by_dimension.values()) == sum(report.records_by_dimension.values()) > 0
    assert digests(directory) == before


def test_lost_records_are_named_and_kept(settings, embedder, monkeypatch):
    """Vectors whose record is gone (memory.db lost its last writes) are the last trace of
    those answers: `check` names them as lost records with their ids and how to keep them,
    never advises a repair that deletes them, and `repair` keeps them."""
    import sqlite3

    directory = memory_of_six(settings, embedder)
    db = sqlite3.connect(directory / "memory.db")
    with db:
        for cid in ("c2", "c5"):
            db.execute("DELETE FROM traces WHERE chunk_id = ?", (cid,))
            db.execute("DELETE FROM chunks WHERE id = ?", (cid,))
    db.close()
    lost = cli(settings, monkeypatch, "check", "alice")
    assert lost.exit_code == 6, lost.output
    assert "LOST RECORDS" in lost.output and "c2" in lost.output and "c5" in lost.output, lost.output
    assert "memory restore" in lost.output and "keeps these vectors" in lost.output, lost.output
    assert "deleted by" not in lost.output and "BROKEN" not in lost.output, lost.output
    report = check(settings.principals_dir, "alice")
    assert report.lost_records == ["c2", "c5"] and report.records == 4

    fixed = cli(settings, monkeypatch, "repair", "alice")
    assert fixed.exit_code == 0 and "LOST RECORDS" in fixed.output and "c2, c5" in fixed.output, fixed.output
    assert check(settings.principals_dir, "alice").lost_records == ["c2", "c5"]  # still there to be found


DIES_AFTER_WRITING = """
import os, sys
from pathlib import Path
from vicar.memory.embedder import default_embedder
from vicar.memory.principal import PrincipalMemory
from vicar.memory.params import MemoryParams
from tests.test_broken_store import chunk

mem = PrincipalMemory("alice", Path(sys.argv[1]), default_embedder(), MemoryParams())
for i in (7, 8):
    mem.record(chunk("alice", i))
mem.vectors.flush()  # the vectors' write-behind (memory/vectors.py) done: this test is about the WAL
os._exit(0)  # dies without closing: the two records are only in memory.db-wal
"""


def test_check_reads_a_dead_writers_wal_on_a_read_only_filesystem(settings, embedder, read_only_view):
    """A backup taken after a crash: the last records sit in memory.db-wal, and a read-only
    mount with no -shm left SQLite unable to open it at all."""
    import subprocess

    directory = memory_of_six(settings, embedder)
    subprocess.run(
        [sys.executable, "-c", DIES_AFTER_WRITING, str(settings.principals_dir)],
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
        timeout=120,
    )
    assert (directory / "memory.db-wal").stat().st_size > 0
    (directory / "memory.db-shm").unlink()
    before = digests(directory)
    report = check(read_only_view(settings.principals_dir), "alice")
    assert report.healthy and report.records == 8, report.problems
    assert digests(directory) == before
