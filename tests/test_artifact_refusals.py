"""What an artifact path may not do (issue 34 item 13), on a real worker and a real
Temporal server: a hard link inside a root to a file outside it is not read (not into
the proxy, the gate's view, its history or the webhook); a refusal tells the person a
short reason, never where a symlink led, the configured roots or the worker's pid (the
details go to the worker's log); and whatever happens to the path while it is resolved
(a swap, a working directory removed, a name no file system can hold), confine()
refuses it with its own type, never another exception."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vicar.artifacts import confine, read_artifact_file
from vicar.client.gates import answer_gate, start_gate
from vicar.client.view import gate_view
from vicar.errors import ArtifactRefused
from vicar.models import HumanAnswer
from vicar.settings import CalibrationParams, Settings

from .conftest import LOOSE_AUTONOMY, wait_escalated, wait_for
from .test_slack_webhook import Receiver

SECRET = "the-secret-outside-every-root"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture
def settings(tmp_path: Path, receiver) -> Settings:
    (tmp_path / "art").mkdir()
    return Settings(
        data_dir=tmp_path / "vicar",
        calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY),
        artifact_roots=[tmp_path / "art"],
        webhook_url=receiver.url,
    )


async def _everything_said(h, handle, receiver) -> str:
    """The gate's view, its whole history and every webhook POST, as one text."""
    view = await gate_view(h.client, handle.id)
    history = await handle.fetch_history()
    return view.model_dump_json() + history.to_json() + json.dumps([body for body, _ in receiver.posts])


async def test_a_hard_link_to_a_file_outside_the_roots_is_not_read(harness, receiver, tmp_path, caplog):
    h = harness
    caplog.set_level(logging.WARNING)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    linked = tmp_path / "art" / "plan.md"
    os.link(outside / "secret.txt", linked)
    req = h.request(h.principal(), escalation_mode="always", artifact_paths=[str(linked)])
    handle = await start_gate(h.client, req, h.task_queue)
    details = await wait_escalated(h.client, req.gate_id)
    assert details.calibration_guard == "proxy_error"
    assert f"artifact path {str(linked)!r} has another hard link" in details.calibration_note
    view = await gate_view(h.client, handle.id)
    [shown] = view.artifact_files
    assert shown.excerpt == "" and "has another hard link" in shown.error

    async def posted():
        return receiver.posts

    await wait_for(posted)
    await answer_gate(h.client, req.gate_id, HumanAnswer(action="hold", text="Inline it.", responder="tester"))
    await handle.result()
    said = await _everything_said(h, handle, receiver)
    assert SECRET not in said
    assert any("2 links" in r.getMessage() for r in caplog.records)  # the details, in the worker's log
    # The same file with its only link inside the root is read.
    os.unlink(outside / "secret.txt")
    assert read_artifact_file(str(linked), h.settings.artifact_roots, 100) == f"{SECRET}\n"


async def test_a_refusal_shows_the_reason_not_where_the_path_led(harness, receiver, tmp_path, caplog):
    h = harness
    caplog.set_level(logging.WARNING)
    root = tmp_path / "art"
    (root / "env").symlink_to("/proc/self/environ")
    (root / "away").symlink_to(tmp_path)
    paths = [str(root / "env"), str(root / "away" / "x.txt"), "/etc/passwd"]
    for path in paths:
        req = h.request(h.principal(), escalation_mode="always", artifact_paths=[path])
        handle = await start_gate(h.client, req, h.task_queue)
        details = await wait_escalated(h.client, req.gate_id)
        assert details.calibration_guard == "proxy_error"
        assert f"artifact path {path!r} is outside the artifact roots" in details.calibration_note
        await answer_gate(h.client, req.gate_id, HumanAnswer(action="hold", text="No.", responder="tester"))
        await handle.result()
        said = await _everything_said(h, handle, receiver)
        rest = said
        for given in paths:  # the paths as given are in the requests (the webhook keeps every gate's)
            rest = rest.replace(given, "")
        for never in ("/proc/", str(root), str(tmp_path / "x.txt"), "resolves to"):
            at = rest.find(never)
            assert at < 0, (path, never, rest[max(at - 300, 0) : at + 100])
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert f"resolves to '/proc/{os.getpid()}/environ'" in logged and f"the roots: {root}" in logged


def test_confine_refuses_with_its_own_type_whatever_the_path_does(tmp_path):
    """Deterministic cases first: a name no file system can hold (a lone surrogate), and a
    relative path in a process whose working directory was removed (realpath's getcwd
    fails). Then a swap race with a real process replacing the path's components."""
    root = tmp_path / "art"
    root.mkdir()
    with pytest.raises(ArtifactRefused, match="is not a valid path"):
        confine(f"{root}/\ud800", [root])
    with pytest.raises(ArtifactRefused, match="is not a valid path"):
        read_artifact_file(f"{root}/\ud800", [root], 10)
    code = (
        "import os, sys\nfrom pathlib import Path\n"
        "from vicar.artifacts import confine\nfrom vicar.errors import ArtifactRefused\n"
        "os.chdir(sys.argv[1]); os.rmdir(sys.argv[1])\n"
        "try:\n    confine('plan.md', [Path(sys.argv[2])])\n"
        "except ArtifactRefused as exc:\n    print('refused:', exc)\n"
    )
    gone = tmp_path / "gone"
    gone.mkdir()
    run = subprocess.run([sys.executable, "-c", code, str(gone), str(root)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("refused: artifact path 'plan.md' changed"), run.stderr

    (root / "f.txt").write_text("x")
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root), str(SWAPPED), str(RACE_SECONDS + 2)])
    try:
        time.sleep(0.3)
        path = str(root) + "".join(f"/s{k}/.." for k in range(SWAPPED)) + "/f.txt"
        escaped: dict[str, int] = {}
        reads = 0
        end = time.monotonic() + RACE_SECONDS
        while time.monotonic() < end:
            reads += 1
            try:
                read_artifact_file(path, [root], 10)
            except ArtifactRefused:
                pass
            except Exception as exc:  # what the refusal type must hold
                escaped[type(exc).__name__] = escaped.get(type(exc).__name__, 0) + 1
    finally:
        swapper.kill()
        swapper.wait()
    print(f"swap race: {reads} reads, escaped {escaped}")
    assert escaped == {}, f"{escaped} in {reads} reads"


RACE_SECONDS = float(os.environ.get("VICAR_RACE_SECONDS", "3"))
SWAPPED = 16  # path components swapped at once: each read meets 16 chances of the race
# Each component in turn a symlink (to the root), a directory, and nothing.
SWAPPER = r"""
import os, sys, time
root, k_count, end = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
i = 0
while time.monotonic() < end:
    i += 1
    for k in range(k_count):
        name, tmp = os.path.join(root, f"s{k}"), os.path.join(root, f".t{k}")
        try:
            if i % 3 == 0:
                os.symlink(root, tmp)
                os.replace(tmp, name)
            elif i % 3 == 1:
                os.mkdir(tmp)
                os.replace(tmp, name)
            elif os.path.islink(name):
                os.unlink(name)
            else:
                os.rmdir(name)
        except OSError:
            for gone in (tmp, name):
                try:
                    os.unlink(gone)
                except OSError:
                    try:
                        os.rmdir(gone)
                    except OSError:
                        pass
"""
