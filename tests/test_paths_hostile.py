"""Every id or name that becomes a path (issue 24, items 1, 2 and 4 and their family):
a move id, a principal from a workflow's input or a backup's manifest, a memory
directory that is a symlink out. Each is checked where it is used, and the resolved
path must stay under its base: nothing outside the data directory is written or
deleted, and a move never deletes the only copy."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.errors import InvalidInput
from vicar.memory.registry import MemoryRegistry
from vicar.models.brain import BrainStatus
from vicar.runtime.sharding import shard_of
from vicar.settings import MemoryParams

from .conftest import VicarHarness, let_test_responders_in
from .shard_homes import move, sharded, two_homes
from .test_backup import vicar as vicar_cli
from .test_gate import run_answering


def victim(tmp_path: Path) -> Path:
    """A directory outside every data directory, which nothing may touch."""
    d = tmp_path / "victimdir"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    return d


def untouched(d: Path) -> bool:
    return sorted(p.name for p in d.iterdir()) == ["precious.txt"] and (d / "precious.txt").read_text() == "keep me"


def test_child_path_refuses_names_that_leave_their_base(tmp_path):
    from vicar.memory.names import child_path

    base = tmp_path / "principals"
    base.mkdir()
    assert child_path(base, "alice") == base / "alice"
    assert child_path(base, "3f2a-uuid.x", "move id") == base / "3f2a-uuid.x"
    for bad in (
        ".",
        "..",
        "../x",
        "../../victimdir",
        "/etc",
        str(tmp_path),
        "a/b",
        "",
        "x\n",
        "a\x00b",
        "-x",
        "x" * 200,
    ):
        with pytest.raises(InvalidInput):
            child_path(base, bad)
    # A name that passes, but a symlink there leads out of the base.
    (tmp_path / "outside").mkdir()
    (base / "linked").symlink_to(tmp_path / "outside")
    with pytest.raises(InvalidInput, match="outside"):
        child_path(base, "linked")


def test_the_move_activities_refuse_ids_that_leave_the_data_dir(tmp_path, embedder, settings):
    """The activities themselves (with the real transfer code), whoever calls them: a
    move id or principal that is not one path component is refused, non-retryable, and
    nothing outside the data directory is created, written or deleted."""
    from vicar.activities.move import MoveActivities

    settings.data_dir.mkdir(parents=True)
    target = victim(tmp_path)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    registry.get("alice")
    moves = MoveActivities(None, registry, settings)
    # data_dir/moves/../../victimdir is tmp_path/victimdir.
    for move_id in ("../../victimdir", str(target), "..", "a/../../../victimdir"):
        step = c.MoveStep(principal="alice", move_id=move_id)
        for call in (
            lambda: moves.export_memory(step),
            lambda: moves.remove_memory(step),
            lambda: moves.export_piece(c.MovePiece(principal="alice", move_id=move_id, index=0)),
            lambda: moves.import_piece(c.MovePiece(principal="alice", move_id=move_id, index=0, data="eA==")),
            lambda: moves.install_memory(
                c.MoveInstall(
                    principal="alice", move_id=move_id, snapshot=dict(size=1, sha256="0" * 64, pieces=1, outcomes=0)
                )
            ),
        ):
            with pytest.raises(ApplicationError) as err:
                call()
            assert err.value.non_retryable and "move id" in str(err.value), err.value
        assert untouched(target), move_id
    for principal in ("../victimdir", "../../victimdir", str(target), "."):
        with pytest.raises(ApplicationError) as err:
            moves.remove_memory(c.MoveStep(principal=principal, move_id="m1"))
        assert err.value.non_retryable and "principal" in str(err.value)
        assert untouched(target), principal
    assert (settings.principals_dir / "alice" / "memory.db").is_file()
    registry.close()


async def test_a_hand_started_move_with_a_hostile_input_fails_at_once_and_deletes_nothing(
    temporal_env, embedder, settings, tmp_path
):
    """Issue 24 item 1: `VicarMove` started by hand with move_id "../../victimdir" (or an
    absolute path) completed "moved" and deleted the victim directory. Now the workflow
    fails in its first task with one line, non-retryable, before taking any turn; the
    victim and the memory are intact, and a good move afterwards still works."""
    base, task_queue, homes, registries, groups, p = await two_homes(temporal_env, embedder, settings, tmp_path, "hm")
    target = victim(tmp_path)
    assert (homes[0].data_dir / "moves" / "../../victimdir").resolve() == target.resolve()
    async with groups[0], groups[1]:
        h = VicarHarness(temporal_env.client, task_queue, registries[0], base)
        await run_answering(h, h.request(p, task_type="docs", artifact="Fix typo."))
        bad_inputs = [
            {"principal": p, "to_shard": 1, "move_id": "../../victimdir"},
            {"principal": p, "to_shard": 1, "move_id": str(target)},
            {"principal": "../../victimdir", "to_shard": 1},
            {"principal": p, "to_shard": -1},
            {"principal": p, "to_shard": 100000},
            # What runs carry between them, given to a first run: a chosen move id could
            # share another move's staging; a snapshot would skip the archive.
            {"principal": p, "to_shard": 1, "move_id": "fine-looking"},
            {
                "principal": p,
                "to_shard": 1,
                "from_shard": 0,
                "next_piece": 5,
                "snapshot": {"size": 1, "sha256": "0" * 64, "pieces": 1, "outcomes": 0},
            },
            {"principal": p},
            "garbage",
        ]
        for i, inp in enumerate(bad_inputs):
            started = time.monotonic()
            handle = await temporal_env.client.start_workflow(
                c.MOVE_WORKFLOW,
                inp,
                id=f"hostile-move-{uuid.uuid4().hex[:6]}-{i}",
                task_queue=task_queue,
                result_type=c.MoveReport,
            )
            with pytest.raises(WorkflowFailureError) as err:
                await asyncio.wait_for(handle.result(), timeout=30)
            took = time.monotonic() - started
            print(f"hostile move input {i}: failed in {took:.2f} s")
            assert took < 10, took  # its first task, not a retry loop
            cause = err.value.cause
            assert isinstance(cause, ApplicationError) and cause.non_retryable, (inp, cause)
            assert cause.message.startswith("invalid move input: ") and "\n" not in cause.message, cause.message
            assert untouched(target), inp
            assert (homes[0].principals_dir / p / "memory.db").is_file(), inp
            scheduled = [
                e
                async for e in handle.fetch_history_events()
                if e.HasField("activity_task_scheduled_event_attributes")
                or e.HasField("marker_recorded_event_attributes")
            ]
            assert scheduled == [], inp  # refused before any step (not even the turn)
        # The principal's turn was never taken: a real move goes through.
        report = await move(temporal_env.client, p, task_queue)
        assert report.moved and report.to_shard == 1
        assert (homes[1].principals_dir / p / "memory.db").is_file()
        assert not (homes[0].principals_dir / p).exists()
        assert untouched(target)
    for r in registries:
        r.close()


async def test_a_move_between_shards_one_worker_serves_keeps_the_memory(temporal_env, embedder, settings):
    """Issue 24 item 2: one worker serving every shard (`--shards all`, one data
    directory): the source and destination of a move are the same directory. The move
    changes the shard and leaves the memory where it is, whole; the next gate runs on
    the new shard with what was learned."""
    from vicar.worker import build_worker

    settings = sharded(settings, 2)
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    p = next(q for q in (f"one-{uuid.uuid4().hex[:6]}-{i}" for i in range(100)) if shard_of(q, 2) == 0)
    let_test_responders_in(settings.principals_dir, p)
    async with worker:
        h = VicarHarness(temporal_env.client, task_queue, registry, settings)
        before = [await run_answering(h, h.request(p, task_type="docs", artifact=f"Fix typo {i}.")) for i in range(3)]
        human = registry.get(p).stats().human_answered
        assert human >= 1
        report = await move(temporal_env.client, p, task_queue)
        assert report.to_shard == 1 and report.outcomes == 3
        assert (settings.principals_dir / p / "memory.db").is_file(), "the move deleted the only copy"
        assert registry.get(p).stats().human_answered == human
        status = await temporal_env.client.get_workflow_handle(c.brain_workflow_id(p)).query(
            "status", result_type=BrainStatus
        )
        assert status.shard == 1
        after = await run_answering(h, h.request(p, task_type="docs", artifact="Fix typo 3."))
        assert after.n > before[-1].n
        assert registry.get(p).store.outcome_seq(c.gate_workflow_id(after.gate_id)) is not None
        assert not list((settings.data_dir / "moves").iterdir())  # the staging is cleaned up
    registry.close()


def test_transfer_between_one_directory_keeps_the_memory(tmp_path, embedder, settings):
    """The transfer steps alone, source and destination one directory (as one worker
    serving both shards sees them): install keeps the memory, remove keeps it too."""
    from vicar.memory import transfer

    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    registry.get("bob")
    registry.close()
    memory_dir, staging = settings.principals_dir / "bob", settings.data_dir / "moves" / "m1"
    snap = transfer.snapshot(memory_dir, staging)
    for i in range(snap.pieces):
        transfer.write_piece(staging, i, transfer.read_piece(staging, i))
    assert transfer.install(staging, memory_dir, snap) == snap.outcomes
    transfer.remove(memory_dir, staging)
    assert (memory_dir / "memory.db").is_file()
    assert not staging.exists()
    # Two directories: the old copy goes once the new one is installed elsewhere.
    other_dir, other_staging = tmp_path / "other" / "principals" / "bob", tmp_path / "other" / "moves" / "m2"
    snap = transfer.snapshot(memory_dir, settings.data_dir / "moves" / "m2")
    for i in range(snap.pieces):
        transfer.write_piece(other_staging, i, transfer.read_piece(settings.data_dir / "moves" / "m2", i))
    assert transfer.install(other_staging, other_dir, snap) == snap.outcomes
    transfer.remove(memory_dir, settings.data_dir / "moves" / "m2")
    assert not memory_dir.exists() and (other_dir / "memory.db").is_file()


@pytest.mark.parametrize("name", [".", "..", "../victimdir", "/tmp", "a/b"])
def test_a_crafted_backup_manifest_is_refused_in_one_line(tmp_path, embedder, name):
    """Issue 24 item 4: a manifest naming "." renamed the whole principals/ folder aside
    (exit 70); ".." left a lock in the data dir's root. A name from a manifest is
    checked like one on the command line: exit 2, one line, nothing touched."""
    from vicar.backup import backup

    data_dir = tmp_path / "data"
    principals = data_dir / "principals"
    registry = MemoryRegistry(principals, lambda: embedder, MemoryParams())
    registry.get("alice")
    registry.close()
    src = tmp_path / "backup"
    backup(principals, ["alice"], src)
    # What "." and ".." would read from: a memory where the crafted name leads.
    for where in (src / "principals", src):
        shutil.copy(src / "principals" / "alice" / "memory.db", where / "memory.db")
    manifest = json.loads((src / "vicar-backup.json").read_text())
    manifest["principals"][0]["principal"] = name
    (src / "vicar-backup.json").write_text(json.dumps(manifest))
    before = sorted(p.name for p in data_dir.iterdir())
    out = vicar_cli(data_dir, "memory", "restore", str(src), "--all")
    assert out.returncode == InvalidInput.exit_code, (out.returncode, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.stderr, out.stderr
    assert "principal" in lines[0]
    assert sorted(p.name for p in data_dir.iterdir()) == before  # no principals.before-restore-*, no lock
    assert (principals / "alice" / "memory.db").is_file()
    # The same name asked for on the command line: the same refusal.
    if "/" not in name:
        named = vicar_cli(data_dir, "memory", "restore", str(src), name)
        assert named.returncode == InvalidInput.exit_code, named.stderr
        assert sorted(p.name for p in data_dir.iterdir()) == before


def test_a_memory_directory_linked_out_of_the_data_dir_is_refused(tmp_path, embedder, settings):
    """The family: a principal's directory that is a symlink to elsewhere is not
    opened, written or listed as that principal's memory (the memory, its allow-list)."""
    from vicar.memory.check import check as check_memory
    from vicar.responders import save_allowed

    outside = tmp_path / "outside"
    outside.mkdir()
    settings.principals_dir.mkdir(parents=True)
    (settings.principals_dir / "mallory").symlink_to(outside)
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    with pytest.raises(InvalidInput, match="outside"):
        registry.get("mallory")
    with pytest.raises(InvalidInput, match="outside"):
        save_allowed(settings.principals_dir, "mallory", ["alice"])
    # `vicar memory check` reads only, but must not read another tree as this memory either.
    (outside / "memory.db").write_bytes(b"")
    with pytest.raises(InvalidInput, match="outside"):
        check_memory(settings.principals_dir, "mallory")
    assert [p.name for p in outside.iterdir()] == ["memory.db"]
    registry.close()


def test_the_cli_refuses_a_linked_out_memory_in_one_line(tmp_path, monkeypatch):
    """The same through the command line: one line, exit 2, nothing written outside."""
    from typer.testing import CliRunner

    from vicar.cli import app

    from .test_bad_input import error_line

    data_dir = tmp_path / "data"
    outside = tmp_path / "outside"
    outside.mkdir()
    (data_dir / "principals").mkdir(parents=True)
    (data_dir / "principals" / "mallory").symlink_to(outside)
    monkeypatch.setenv("VICAR_DATA_DIR", str(data_dir))
    for args in (
        ["principal", "allow", "mallory", "alice"],
        ["principal", "allowed", "mallory"],
        ["principal", "allow", "../outside", "alice"],
        ["principal", "move", "../x", "--to-shard", "0"],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == InvalidInput.exit_code, (args, result.output)
        assert "principal" in error_line(result), args
    assert list(outside.iterdir()) == []


def test_a_backup_holding_a_symlink_is_refused(tmp_path, embedder):
    """A crafted backup whose memory holds a symbolic link (models/ -> elsewhere, a log
    file -> elsewhere) is refused before anything is restored: restored, the worker
    would write through it outside the data directory."""
    from vicar.backup import backup

    data_dir, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    registry = MemoryRegistry(data_dir / "principals", lambda: embedder, MemoryParams())
    registry.get("alice")
    registry.close()
    for i, (entry, points_to) in enumerate((("models", outside), ("proxy-interactions.jsonl", outside / "log"))):
        src = tmp_path / f"backup-{i}"
        backup(data_dir / "principals", ["alice"], src)
        (src / "principals" / "alice" / entry).symlink_to(points_to)
        before = sorted(p.name for p in (data_dir / "principals").iterdir())
        out = vicar_cli(data_dir, "memory", "restore", str(src), "--all", "--force")
        assert out.returncode == InvalidInput.exit_code, (out.returncode, out.stderr)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "not a regular file" in lines[0], out.stderr
        assert sorted(p.name for p in (data_dir / "principals").iterdir()) == before
        assert not (data_dir / "principals" / "alice" / entry).is_symlink()
    assert list(outside.iterdir()) == []
