"""No held answer is lost: the inbox holds each answer for its undo window, then sends
it. A send that cannot reach its gate (Temporal down, a frozen worker) is kept and tried
again until the gate takes it or refuses it for good, and the person is told the truth
meanwhile; a held file damaged on disk is reported to its person and the log, never
skipped silently. Real parts: `vicar inbox` as its own process, a Temporal dev server
this test stops and starts again, a real worker."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from vicar.client.gates import start_gate
from vicar.inbox.accounts import add_user
from vicar.inbox.held import held_dir
from vicar.memory.registry import MemoryRegistry
from vicar.models import GateRequest
from vicar.responders import save_allowed
from vicar.runtime.server import EmbeddedServer, free_port
from vicar.settings import Settings

from .conftest import LOOSE_AUTONOMY, wait_escalated
from .inbox_process import InboxProcess, said

UNDO_SECONDS = 10  # the inbox's window (vicar inbox serves with the default)


def request(principal: str, question: str) -> GateRequest:
    return GateRequest(
        principal=principal,
        gate_id=f"g-{uuid.uuid4().hex[:12]}",
        state="PLAN_ASSERT",
        task_type="schema",
        question=question,
        artifact_text="Add a column c to table t; rollback: drop it.",
    )


def held_files(data: Path, suffix: str = "*") -> list[Path]:
    return sorted(held_dir(data).glob(f"*.{suffix}")) if held_dir(data).is_dir() else []


async def wait_said(inbox: InboxProcess, words: str, timeout: float = 90.0) -> list[str]:
    """The page's lines about held answers, once one of them has `words` (read once each)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += said(await inbox.page())
        if any(words in line for line in seen):
            return seen
        await asyncio.sleep(0.5)
    raise AssertionError(f"no line saying {words!r}: {seen}\n{inbox.log()[-3000:]}")


class Server:
    """An embedded-style dev server on fixed ports with its database on disk, stopped and
    started again on the same address."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ports = {"port": free_port(), "ui_port": free_port()}
        self.server: EmbeddedServer | None = None

    async def start(self) -> str:
        self.server = EmbeddedServer(self.folder, given=self.ports)
        await asyncio.to_thread(self.server.start)
        return self.server.address

    async def stop(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)


@pytest.fixture
async def own_temporal(tmp_path):
    server = Server(tmp_path / "temporal-home")
    await server.start()
    yield server
    await server.stop()


async def test_a_held_answer_survives_temporal_gone_as_its_window_closes(own_temporal, embedder, tmp_path):
    """The person answers; Temporal goes away inside the undo window and stays away 25 s
    after it closes: the answer is kept (the person told why, in words that are true),
    and sent once Temporal is back. Before: 'not sent … tcp connect error', the file
    deleted, the gate waiting for ever."""
    from temporalio.client import Client

    from vicar.runtime.codec import data_converter
    from vicar.worker import build_worker

    data = tmp_path / "vicar"
    settings = Settings(
        data_dir=data, calibration=Settings().calibration.model_copy(update={"autonomy": LOOSE_AUTONOMY})
    )
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(own_temporal.server.address, data_converter=data_converter(settings, make_keys=True))
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(client, settings, registry=registry, task_queue=queue)
    inbox = InboxProcess(
        {"VICAR_DATA_DIR": str(data), "TEMPORAL_ADDRESS": own_temporal.server.address, "VICAR_TASK_QUEUE": queue},
        tmp_path / "inbox.log",
    )
    p = f"p-{uuid.uuid4().hex[:8]}"
    token = add_user(data, "alice", [p])[1]
    save_allowed(settings.principals_dir, p, ["alice"])
    try:
        async with worker:
            req = request(p, "Roll out the schema?")
            await start_gate(client, req, queue)
            await wait_escalated(client, req.gate_id)
            wid = f"vicar-gate/{req.gate_id}"
            await inbox.start()
            await inbox.sign_in(token)
            await inbox.answer(wid)
            assert len(held_files(data, "json")) == 1
            await own_temporal.stop()  # inside the window
            await asyncio.sleep(UNDO_SECONDS + 5)
            lines = await wait_said(inbox, "not taken yet")
            line = next(s for s in lines if "not taken yet" in s)
            assert "approve Roll out the schema?" in line and "Temporal cannot be reached" in line, line
            assert "kept and sent again" in line, line
            (kept,) = held_files(data, "json")  # kept, tried again, no longer undoable
            assert json.loads(kept.read_text())["tries"] >= 1
            await asyncio.sleep(20)
            await own_temporal.start()  # the same address, the same database
            result = await asyncio.wait_for(client.get_workflow_handle(wid).result(), 120)
            assert (result["action"], result["responder"]) == ("approve", "alice")
            lines = await wait_said(inbox, "sent: approve Roll out the schema?")
            assert not any(s.startswith("sent:") and "not sent" in s for s in lines), lines
            assert held_files(data) == [] or all(p.is_dir() for p in held_files(data))
            assert "was not sent" not in inbox.log()
    finally:
        inbox.stop()
        registry.close()


async def test_a_damaged_held_file_is_said_and_logged_and_the_other_is_sent(harness, tmp_path):
    """Two answers held; one file is truncated while the inbox is frozen (SIGSTOP). When
    it runs again the other is sent, and the damaged one is neither sent nor skipped
    silently: the person's next page and the inbox's log say so, and it leaves held/
    (kept aside for whoever looks into it)."""
    h = harness
    data = tmp_path / "vicar"
    p = h.principal()
    token = add_user(data, "alice", [p])[1]
    save_allowed(Settings(data_dir=data).principals_dir, p, ["alice"])
    save_allowed(h.settings.principals_dir, p, ["alice"])
    wids = []
    for question in ("Merge the first?", "Merge the second?"):
        req = h.request(p, artifact=f"{question} Change {uuid.uuid4().hex[:6]}.", question=question)
        await start_gate(h.client, req, h.task_queue)
        await wait_escalated(h.client, req.gate_id)
        wids.append(f"vicar-gate/{req.gate_id}")
    inbox = InboxProcess(
        {
            "VICAR_DATA_DIR": str(data),
            "TEMPORAL_ADDRESS": h.client.service_client.config.target_host,
            "VICAR_TASK_QUEUE": h.task_queue,
        },
        tmp_path / "inbox.log",
    )
    try:
        await inbox.start()
        await inbox.sign_in(token)
        for wid in wids:
            await inbox.answer(wid)
        inbox.signal(signal.SIGSTOP)
        files = held_files(data, "json")
        assert len(files) == 2
        (broken,) = [f for f in files if wids[1] in f.read_text()]
        broken.write_bytes(broken.read_bytes()[:37])  # truncated
        await asyncio.sleep(UNDO_SECONDS + 1)
        inbox.signal(signal.SIGCONT)
        result = await asyncio.wait_for(h.client.get_workflow_handle(wids[0]).result(), 60)
        assert result["responder"] == "alice"
        lines = await wait_said(inbox, "could not be read back")
        assert any(s.startswith("sent: approve Merge the first?") for s in lines), lines
        line = next(s for s in lines if "could not be read back" in s)
        assert line.startswith("not sent:") and "waits for your answer again" in line, line
        assert "could not be read back" in inbox.log() and broken.name in inbox.log()
        assert not broken.exists() and (held_dir(data) / "unreadable" / broken.name).exists()
        assert held_files(data, "json") == []
        # And the gate is on the person's list again, to answer.
        assert wids[1].split("/", 1)[1] in await inbox.page()
    finally:
        inbox.signal(signal.SIGCONT)
        inbox.stop()


async def test_a_frozen_worker_is_not_a_failed_answer(temporal_env, worker_process, tmp_path):
    """The worker is frozen (SIGSTOP) as the window closes and stays so for 60 s: the
    gate cannot take the answer meanwhile. Before, the person read 'not sent … may still
    apply' and the gate took it later. Now they read that it is not taken yet and why,
    it is sent again until the gate takes it, and the last line says it was sent."""
    from temporalio.client import Client

    from vicar.runtime.codec import data_converter

    data = tmp_path / "vicar"
    worker = worker_process(data)
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, data_converter=data_converter(Settings(data_dir=data))
    )
    p = f"p-{uuid.uuid4().hex[:8]}"
    token = add_user(data, "alice", [p])[1]
    save_allowed(Settings(data_dir=data).principals_dir, p, ["alice"])
    inbox = InboxProcess(
        {
            "VICAR_DATA_DIR": str(data),
            "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "VICAR_TASK_QUEUE": worker.task_queue,
        },
        tmp_path / "inbox.log",
    )
    await worker.start()
    assert worker.proc is not None
    try:
        req = request(p, "Ship the release?")
        await start_gate(client, req, worker.task_queue)

        async def escalated():
            from vicar.client.gates import gate_details
            from vicar.models import GateStatus

            d = await gate_details(client, req.gate_id)
            return d if d and d.status is GateStatus.escalated else None

        from .conftest import wait_for

        await wait_for(escalated, timeout=120)
        wid = f"vicar-gate/{req.gate_id}"
        await inbox.start()
        await inbox.sign_in(token)
        await inbox.answer(wid)
        worker.proc.send_signal(signal.SIGSTOP)  # inside the window
        frozen_at = time.monotonic()
        lines = await wait_said(inbox, "not taken yet", timeout=120)
        line = next(s for s in lines if "not taken yet" in s)
        assert "approve Ship the release?" in line and "its gate has not taken it yet" in line, line
        assert "keeps failing" not in line, line  # a frozen worker is not a failing gate
        assert "kept and sent again" in line, line
        await asyncio.sleep(max(0.0, 60 - (time.monotonic() - frozen_at)))
        worker.proc.send_signal(signal.SIGCONT)
        result = await asyncio.wait_for(client.get_workflow_handle(wid).result(), 180)
        assert (result["action"], result["responder"]) == ("approve", "alice")
        lines += await wait_said(inbox, "sent: approve Ship the release?", timeout=120)
        assert not any("not sent" in s for s in lines), lines  # never told it failed
        assert held_files(data, "json") == [] and held_files(data, "sending") == []
    finally:
        if worker.proc.returncode is None:
            worker.proc.send_signal(signal.SIGCONT)
        inbox.stop()


def test_what_is_not_a_held_answer_in_the_folder_is_set_aside_and_said(tmp_path):
    """Other ways a held file goes bad, found beside the truncated one: a FIFO (reading it
    would block the sender for ever), a link out of the folder, a folder, JSON of another
    shape, a file past the size bound. Each is set aside and said to its account; the
    good answer beside them is claimed, at once."""
    import os

    from vicar.inbox import held as holds

    data = tmp_path / "vicar"
    folder = holds.held_dir(data)
    folder.mkdir(parents=True)
    good = holds.hold(data, holds.new_held("alice", "approve", "", 0, {"vicar-gate/g1": "p"}, {"vicar-gate/g1": "Q?"}))
    bad = {
        "a": lambda p: os.mkfifo(p),
        "b": lambda p: p.symlink_to("/etc/hostname"),
        "c": lambda p: p.mkdir(),
        "d": lambda p: p.write_text('["not", "a", "held", "answer"]'),
        "e": lambda p: p.write_text('{"id": "x"}'),
        "f": lambda p: p.write_bytes(b" " * (holds.MAX_HELD_BYTES + 10)),
    }
    old = time.time() - 60  # past BROKEN_AFTER_SECONDS: not a file being written
    for letter, make in bad.items():
        path = folder / f"{letter * 32}-alice.json"
        make(path)
        os.utime(path, (old, old), follow_symlinks=False)
    started = time.monotonic()
    claimed = holds.claim_due(data)
    assert time.monotonic() - started < 5
    assert [h.id for _, h in claimed] == [good.id]
    assert sorted(p.name[0] for p in (folder / "unreadable").iterdir()) == sorted(bad)
    lines = holds.said_lines(data, "alice")
    assert len(lines) == len(bad) and all(s["said"].startswith("not sent: one of your answers") for s in lines)
    assert holds.claim_due(data) == []  # said once, not again
