"""Censors: learned from the human's repeated rejections of one kind of artifact, they
block (then, weakened by approvals, warn about) the next one, through a real gate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.client.gates import answer_gate, gate_details, start_gate
from vicar.llm import prompts
from vicar.memory.principal import PrincipalMemory
from vicar.models import AnsweredBy, Calibration, CalibrationInputs, CensorHit, GateRequest, GateStatus, HumanAnswer
from vicar.proxy.calibration import calibrate
from vicar.proxy.retrieval import retrieve
from vicar.settings import CalibrationParams, MemoryParams, Settings

from .conftest import LOOSE_AUTONOMY, record_answer, wait_escalated, wait_for

DROP = "Migration {n}: drop the column {c} from the production database. There is no rollback step and no backup."
COLUMNS = [
    "users.legacy_email",
    "users.legacy_phone",
    "users.legacy_fax",
    "users.legacy_pager",
    "users.legacy_telex",
    "users.legacy_icq",
]  # MiniLM: 0.77 to 0.85 apart
DOCS = "Docs: fix typos in the README installation section."
INDEX = "Migration 50: add an index on users.created_at, with a rollback step that drops the index."  # 0.51 to 0.57
WHY = "Never drop a column without a rollback step and a backup."


def drop(i: int) -> str:
    return DROP.format(n=40 + i, c=COLUMNS[i])


def gate(principal: str, i: int, artifact: str) -> GateRequest:
    return GateRequest(
        principal=principal,
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve or revise the proposed plan.",
        artifact_text=artifact,
    )


# Censors are off by default (docs/design-decisions.md, "Which mechanisms are on"): on here.
ON = CalibrationParams(censor_min=3)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "vicar", calibration=ON.model_copy(update={"autonomy": LOOSE_AUTONOMY}))


def record(
    mem: PrincipalMemory,
    i: int,
    req: GateRequest,
    action: str,
    text: str = "",
    calibration: Calibration | None = None,
    by: AnsweredBy = AnsweredBy.human,
    at: datetime | None = None,
) -> None:
    record_answer(mem, req, i, action, text, by=by.value, calibration=calibration, at=at, params=ON)


def hits(mem: PrincipalMemory, i: int, artifact: str) -> list[CensorHit]:
    return retrieve(mem, gate("alice", i, artifact), i, "posterior", artifact, params=ON).censors


def test_learned_from_the_third_alike_rejection_and_fires_on_the_fourth(memory):
    record(memory, 1, gate("alice", 1, DOCS), "reject", "Not now.")  # another kind of artifact
    record(memory, 2, gate("alice", 2, drop(0)), "reject", "No rollback?")
    record(memory, 3, gate("alice", 3, drop(1)), "correct", "Add a rollback step.")
    assert memory.store.censors() == [] and hits(memory, 9, drop(3)) == []
    record(memory, 4, gate("alice", 4, drop(2)), "reject", WHY)
    record(memory, 4, gate("alice", 4, drop(2)), "reject", WHY)  # a retried activity: nothing new
    [c] = memory.store.censors()
    assert (c.action, c.status, c.severity, c.reason) == ("block", "active", 1.0, WHY)
    assert len(c.provenance) == 3 and c.pattern.startswith("PLAN_ASSERT db-migration: Migration 42")
    [hit] = hits(memory, 9, drop(3))
    assert (hit.censor_id, hit.action, hit.reason) == (c.id, "block", WHY)
    assert hits(memory, 9, DOCS) == hits(memory, 9, INDEX) == []  # only artifacts like the ones turned back
    # Another rejection alike is covered by the censor: no second one.
    record(memory, 5, gate("alice", 5, drop(4)), "reject", WHY)
    assert len(memory.store.censors()) == 1


def test_approvals_weaken_a_censor_rejections_confirm_it(memory):
    for i in range(3):
        record(memory, i + 1, gate("alice", i + 1, drop(i)), "reject", WHY)
    [c] = memory.store.censors()
    fired = Calibration(confidence=0.5, guard="censor", censors=[c.id])
    record(memory, 10, gate("alice", 10, drop(3)), "approve", "Fine, this table is unused.", calibration=fired)
    record(memory, 10, gate("alice", 10, drop(3)), "approve", "Fine, this table is unused.", calibration=fired)
    [c] = memory.store.censors()
    assert (c.action, c.severity, c.false_positives, c.activations) == ("warn", 0.5, 1, 1)
    assert [h.action for h in hits(memory, 11, drop(4))] == ["warn"]
    record(memory, 11, gate("alice", 11, drop(4)), "reject", WHY, calibration=fired)  # confirmed: back to block
    assert memory.store.censors()[0].action == "block"
    for i in (12, 13):
        record(memory, i, gate("alice", i, drop(5)), "approve", "Fine.", calibration=fired)
    [c] = memory.store.censors()
    assert (c.status, c.severity, c.false_positives, c.confirmations) == ("deactivated", 0.25, 3, 1)
    assert hits(memory, 14, drop(3)) == []
    # The proxy's own answer under a warning is an activation, not feedback.
    record(memory, 15, gate("alice", 15, DOCS), "approve", "Fine.", calibration=fired, by=AnsweredBy.proxy)
    assert memory.store.censors()[0].activations == 5 and memory.store.censors()[0].false_positives == 3


def test_block_is_the_first_guard_and_warn_goes_in_the_note():
    block = CensorHit(censor_id="k-1", action="block", reason=WHY, similarity=0.9)
    warn = CensorHit(censor_id="k-2", action="warn", reason="Mind the backups.", similarity=0.8)
    cal = calibrate(0.95, CalibrationInputs(censors=[block, warn]), ON)
    assert cal.guard == "censor" and cal.fired[0] == "censor" and not cal.autonomous
    assert WHY in cal.note and "Mind the backups." in cal.note and cal.censors == ["k-1", "k-2"]
    assert cal.confidence == 0.95  # a censor withholds the answer; it does not doubt the score
    cal = calibrate(0.95, CalibrationInputs(censors=[warn]), ON)
    assert "censor" not in cal.fired and "censor k-2 (warn, similarity 0.80): Mind the backups." in cal.note


def test_the_llm_prompt_shows_the_censors():
    hit = CensorHit(
        censor_id="k-1", action="warn", reason=WHY, pattern="PLAN_ASSERT db-migration: Migration 41", similarity=0.9
    )
    body = prompts.pass_body(gate("alice", 1, drop(3)), [], [], artifact=drop(3), censors=[hit])
    assert "CENSORS" in body and WHY in body and body.index(WHY) < body.index("ARTIFACT")
    assert "CENSORS" not in prompts.pass_body(gate("alice", 1, drop(3)), [], [], artifact=drop(3))


def test_memory_censors_lists_shows_disables_and_enables(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    mem = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        for i in range(3):
            record(mem, i + 1, gate("alice", i + 1, drop(i)), "reject", WHY)
        [c] = mem.store.censors()
    finally:
        mem.close()
    run = CliRunner().invoke
    listed = run(app, ["memory", "censors", "alice"], terminal_width=250)
    assert listed.exit_code == 0 and c.id in listed.output and "block" in listed.output
    shown = run(app, ["memory", "censors", "alice", "--show", c.id], terminal_width=250)
    assert shown.exit_code == 0 and WHY in shown.output and c.provenance[0] in shown.output
    off = run(app, ["memory", "censors", "alice", "--disable", c.id])
    assert off.exit_code == 0 and "disabled" in off.output
    mem = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        assert hits(mem, 9, drop(3)) == []  # disabled: never fires
        record(mem, 9, gate("alice", 9, drop(3)), "reject", WHY)
        assert len(mem.store.censors()) == 1  # ... and is not learned again behind the operator's back
    finally:
        mem.close()
    on = run(app, ["memory", "censors", "alice", "--enable", c.id])
    assert on.exit_code == 0 and "active (block)" in on.output
    missing = run(app, ["memory", "censors", "alice", "--show", "k-nope"])
    assert missing.exit_code == 3 and "no censor 'k-nope'" in missing.output
    both = run(app, ["memory", "censors", "alice", "--enable", c.id, "--disable", c.id])
    assert both.exit_code == 2 and "at most one" in both.output


async def test_a_censor_from_three_rejections_blocks_the_fourth_gate_and_an_approval_weakens_it(harness):
    p = harness.principal()
    memory = harness.registry.get(p)
    at = datetime.now(UTC) - timedelta(hours=1)
    # A memory that would answer alone: four approved typo fixes prove the threshold...
    for i in range(4):
        record(memory, i + 1, gate(p, i + 1, DOCS), "approve", "Fine.", at=at)
    # ... and three rejected column drops teach the censor.
    for i in range(3):
        record(memory, i + 5, gate(p, i + 5, drop(i)), "reject", WHY, at=at)
    [censor] = memory.store.censors()
    req = harness.request(p, artifact=drop(3))
    handle = await start_gate(harness.client, req, harness.task_queue)
    details = await wait_escalated(harness.client, req.gate_id)
    assert details.calibration_guard == "censor"
    assert censor.id in details.calibration_note and WHY in details.calibration_note
    await answer_gate(
        harness.client, req.gate_id, HumanAnswer(action="approve", text="Fine: unused.", responder="alice")
    )
    assert (await handle.result()).answered_by is AnsweredBy.human
    [weakened] = memory.store.censors()
    assert (weakened.action, weakened.severity, weakened.false_positives) == ("warn", 0.5, 1)
    # The next one alike is warned about, not blocked (whether or not another guard sends it
    # to the human).
    req = harness.request(p, artifact=drop(4))
    handle = await start_gate(harness.client, req, harness.task_queue)

    async def settled():
        d = await gate_details(harness.client, req.gate_id)
        return d if d and d.status in (GateStatus.escalated, GateStatus.done) else None

    details = await wait_for(settled)
    assert details.calibration_guard != "censor"
    assert f"censor {weakened.id} (warn, similarity" in details.calibration_note and WHY in details.calibration_note
    if details.status is GateStatus.escalated:
        await handle.terminate()
