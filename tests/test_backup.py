"""Backup and restore (`vicar memory backup` / `restore`) of a memory built by real gates:
taken beside the running worker (records only) and with the memory closed (records and
vectors), the principal deleted, restored through the CLI, and the memory intact."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from vicar.client.gates import answer_gate, start_gate
from vicar.errors import Conflict, NotFound
from vicar.memory.check import check
from vicar.memory.store import RecordStore
from vicar.models import HumanAnswer, OutcomeRecord

from .conftest import wait_escalated

ROOT = Path(__file__).resolve().parents[1]
CORRECTION = "Add a rollback step before running the migration."


def vicar(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vicar.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, VICAR_DATA_DIR=str(data_dir)),
        timeout=300,
    )


def memory_of(principals_dir: Path, principal: str) -> tuple[int, list[str]]:
    store = RecordStore(principals_dir / principal / "memory.db")
    try:
        texts = [OutcomeRecord.model_validate_json(r).response_text for _, r in store.outcomes(answered_by="human")]
        return store.count(), texts
    finally:
        store.close()


async def test_backup_and_restore_a_memory_built_by_real_gates(harness, tmp_path):
    h, principal = harness, harness.principal()
    root, data_dir = h.settings.principals_dir, h.settings.data_dir
    req = h.request(principal, escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="correct", text=CORRECTION, responder="tester"))
    await handle.result()
    await (await start_gate(h.client, h.request(principal, escalation_mode="never"), h.task_queue)).result()
    before = memory_of(root, principal)
    assert before[0] == 2 and before[1] == [CORRECTION]

    # Beside the worker, which has the memory open: the records, not the vectors.
    live = vicar(data_dir, "memory", "backup", principal, "--to", str(tmp_path / "live"))
    assert live.returncode == 0, live.stderr
    assert "records only" in live.stdout and not (tmp_path / "live" / "principals" / principal / "chroma").exists()

    h.registry.close()  # the worker lets go of the memory: a backup now takes the vectors too
    quiet = vicar(data_dir, "memory", "backup", "--all", "--to", str(tmp_path / "quiet"))
    assert quiet.returncode == 0, quiet.stderr
    assert (tmp_path / "quiet" / "principals" / principal / "chroma" / "chroma.sqlite3").is_file()

    for source, rebuilt in (("live", True), ("quiet", False)):
        shutil.rmtree(root / principal)
        out = vicar(data_dir, "memory", "restore", str(tmp_path / source), principal)
        assert out.returncode == 0, out.stderr
        assert f"{principal}: 2 chunks restored" in out.stdout
        assert ("vectors of 2 rebuilt" in out.stdout) is rebuilt, out.stdout
        assert memory_of(root, principal) == before
        assert check(root, principal).healthy

    # A memory already there is kept unless --force, which moves it aside.
    again = vicar(data_dir, "memory", "restore", str(tmp_path / "quiet"), "--all")
    assert again.returncode == Conflict.exit_code and "--force" in again.stderr
    forced = vicar(data_dir, "memory", "restore", str(tmp_path / "quiet"), "--all", "--force")
    assert forced.returncode == 0, forced.stderr
    assert len(list(root.glob(f"{principal}.before-restore-*"))) == 1
    assert memory_of(root, principal) == before

    # An incomplete backup (no manifest) and an unknown principal: one line each.
    (tmp_path / "quiet" / "vicar-backup.json").unlink()
    broken = vicar(data_dir, "memory", "restore", str(tmp_path / "quiet"), "--all", "--force")
    assert broken.returncode == NotFound.exit_code and "not a complete Vicar backup" in broken.stderr
    missing = vicar(data_dir, "memory", "backup", "nobody", "--to", str(tmp_path / "none"))
    assert missing.returncode == NotFound.exit_code and "Traceback" not in missing.stderr


def test_restore_all_force_beside_an_open_memory_replaces_nothing_and_says_so(settings, embedder, tmp_path):
    """Issue 34 item 10: with one memory open in a worker, `restore --all --force` replaced
    the memories before it, stopped (exit 5) at the open one, said nothing of those it had
    replaced, and left its staging folder. Every lock is checked before anything is
    replaced: refused, nothing changes and the line says so; then, the memory closed, it
    restores them all and names each one."""
    from vicar.memory.registry import MemoryRegistry

    from .test_memory_cancel import chunk

    root, data_dir = settings.principals_dir, settings.data_dir
    names = ["rs-a", "rs-b", "rs-c", "rs-d"]
    registry = MemoryRegistry(root, lambda: embedder, settings.memory)
    try:
        for k, name in enumerate(names):
            for i in range(1, k + 2):
                registry.get(name).record(chunk(name, i))
        registry.close()
        backed = vicar(data_dir, "memory", "backup", "--all", "--to", str(tmp_path / "b"))
        assert backed.returncode == 0, backed.stderr
        for name in names:  # what the backup would undo
            registry.get(name).record(chunk(name, 9))
        registry.close()
        before = {name: memory_of(root, name)[0] for name in names}

        registry.get("rs-c")  # open in "the worker" (this process) while the restore runs
        refused = vicar(data_dir, "memory", "restore", str(tmp_path / "b"), "--all", "--force")
        assert refused.returncode == Conflict.exit_code, refused.stdout + refused.stderr
        assert sorted(p.name for p in root.iterdir()) == names  # nothing moved aside, no staging left
        assert {name: memory_of(root, name)[0] for name in names} == before
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "rs-c" in lines[0] and "nothing was replaced" in lines[0], refused.stderr
        assert f"pid {os.getpid()}" in lines[0]
        assert "Traceback" not in refused.stderr
    finally:
        registry.close()

    restored = vicar(data_dir, "memory", "restore", str(tmp_path / "b"), "--all", "--force")
    assert restored.returncode == 0, restored.stderr
    for k, name in enumerate(names):
        assert f"{name}: {k + 1} chunks restored" in restored.stdout, restored.stdout
        assert memory_of(root, name)[0] == k + 1
        assert check(root, name).healthy
    assert len(list(root.glob("*.before-restore-*"))) == len(names)
    assert not list(root.glob(".restore*"))
