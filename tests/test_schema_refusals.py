"""`vicar schema` refuses what the worker refuses: every request and answer the tests show
being refused (tests/test_bad_input.py, test_contract.py, test_cli_hostile.py,
test_text_limits.py, test_paths_hostile.py, test_responders.py) is refused by the real
gate AND by the published JSON Schema, and the valid ones pass both. The webhook's
notice has a schema too, checked against what a real worker POSTs."""

from __future__ import annotations

import asyncio
import re
import uuid

import jsonschema
import pytest
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.client.schema import document
from vicar.errors import INVALID_GATE_REQUEST
from vicar.memory.names import check_principal
from vicar.models import (
    GateRequest,
    GateResult,
    HumanAnswer,
)
from vicar.models.limits import DEFAULT_LIMITS, MAX_ARTIFACT_PATHS, NAME_CHARS, PATH_CHARS, TASK_TYPE_CHARS

from .conftest import wait_escalated

DOC = document()


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = DOC["schemas"][name]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_accepts(name: str, instance) -> bool:
    return validator(name).is_valid(instance)


BASE = {"principal": "alice", "gate_id": "g-1", "state": "PLAN_ASSERT", "task_type": "docs", "question": "Approve?"}
HOSTILE_NAMES = [  # test_cli_hostile.py, test_paths_hostile.py, test_bad_input.py
    "not a name",
    "[/bold]\x1b[31m",
    ".",
    "..",
    "../x",
    "../../victimdir",
    "/etc",
    "a/b",
    "",
    "a\x00b",
    "-x",
    "x" * 200,
    "x" * 65,
]
# Each changes BASE into a request the gate refuses at once (INVALID_GATE_REQUEST).
BAD_REQUESTS: dict[str, dict] = {
    "typo'd field (test_contract)": {"taskType": "docs"},
    "unknown state (test_contract)": {"state": "SHIP_IT"},
    "empty question (test_contract)": {"question": ""},
    "blank question": {"question": "   "},
    "no task_type": {"task_type": None},
    "no question": {"question": None},
    "unknown kind": {"kind": "order"},
    "unknown escalation mode": {"escalation_mode": "sometimes"},
    "zero deadline": {"deadline_seconds": 0},
    "negative deadline": {"deadline_seconds": -5},
    "deadline past a year": {"deadline_seconds": 400 * 24 * 3600},
    **{f"principal {n!r:.30}": {"principal": n} for n in HOSTILE_NAMES},
    **{f"gate_id {g!r:.30}": {"gate_id": g} for g in ("", "../x", "-x", "a b", "g\x00", "g" * 201, "g?x")},
    # test_text_limits.py: every text one over its limit.
    **{
        f"{k} over its limit": {k: v}
        for k, v in {
            "question": "q" * (DEFAULT_LIMITS.question + 1),
            "artifact_text": "a" * (DEFAULT_LIMITS.artifact_text + 1),
            "actor_message": "m" * (DEFAULT_LIMITS.actor_message + 1),
            "task_type": "t" * (TASK_TYPE_CHARS + 1),
            "upstream_agent": "u" * (NAME_CHARS + 1),
            "session_id": "s" * (NAME_CHARS + 1),
            "revision": "r" * (NAME_CHARS + 1),
            "artifact_paths": ["/p"] * (MAX_ARTIFACT_PATHS + 1),
        }.items()
    },
    "artifact path over its limit": {"artifact_paths": ["/" + "p" * PATH_CHARS]},
    "empty artifact path": {"artifact_paths": [""]},
}
GOOD_REQUESTS: dict[str, dict] = {
    "minimal": {},
    "test_contract's": {
        "principal": "p-0123456789",
        "gate_id": "cli-0a1b2c3d",
        "task_type": "db-migration",
        "question": "Approve the migration plan?",
        "escalation_mode": "always",
    },
    "a question": {"kind": "question", "state": "WORK_ASSERT"},
    "every field at its limit": {
        "principal": "a" + "b" * 63,
        "gate_id": "orchestrator/run-1:plan@x." + "g" * 174,
        "question": "q" * DEFAULT_LIMITS.question,
        "artifact_text": "a" * DEFAULT_LIMITS.artifact_text,
        "actor_message": "m" * DEFAULT_LIMITS.actor_message,
        "task_type": "t" * TASK_TYPE_CHARS,
        "artifact_paths": ["/" + "p" * (PATH_CHARS - 1)] * MAX_ARTIFACT_PATHS,
        "upstream_agent": "u" * NAME_CHARS,
        "session_id": "s" * NAME_CHARS,
        "title": "T" * 1000,
        "lineage": "feature/x",
        "revision": "v2",
        "deadline_seconds": 366 * 24 * 3600,
        "escalation_mode": "never",
    },
    "names with every allowed character": {"principal": "a.b_c@d-e", "gate_id": "g.h_i:j@k/l-m"},
}
# Each is refused by the gate's `respond` update (the model's own limits, or the validator).
BAD_ANSWERS: dict[str, dict] = {
    "unknown action (test_bad_input)": {"action": "maybe", "responder": "ann"},
    "unknown action (test_responders)": {"action": "sure", "responder": "alice"},
    "no responder (test_responders)": {"action": "approve"},
    "null responder": {"action": "approve", "responder": None},
    "blank responder (test_responders)": {"action": "approve", "responder": "  "},
    "responder with a control character": {"action": "approve", "responder": "a\x1b[31mb"},
    "responder over 64 characters": {"action": "approve", "responder": "r" * 65},
    "responder over its field limit (test_text_limits)": {"action": "approve", "responder": "x" * (NAME_CHARS + 1)},
    "action over its limit (test_text_limits)": {"action": "x" * (NAME_CHARS + 1), "responder": "ann"},
    "text over its limit (test_text_limits)": {
        "action": "correct",
        "text": "x" * (DEFAULT_LIMITS.answer_text + 1),
        "responder": "ann",
    },
    "1 MB text (test_text_limits)": {"action": "correct", "text": "x" * 1_000_000, "responder": "ann"},
    "a dialog turn with no text": {"action": "dialog", "responder": "ann"},
    "a dialog turn with blank text": {"action": "dialog", "text": " \n", "responder": "ann"},
    "an extra field": {"action": "approve", "responder": "ann", "who": "me"},
    "no action": {"responder": "ann"},
}
GOOD_ANSWERS: dict[str, dict] = {
    "test_contract's": {"action": "approve", "text": "Fine by me.", "responder": "cli"},
    "a dialog turn": {"action": "dialog", "text": "Why now?", "responder": "bob"},
    "limits": {
        "action": "correct",
        "text": "x" * DEFAULT_LIMITS.answer_text,
        "responder": "Ann O'Neil, ops" + "." * 49,
    },
}


def request(change: dict) -> dict:
    out = {**BASE, **change}
    return {k: v for k, v in out.items() if v is not None}


@pytest.mark.parametrize("why", list(BAD_REQUESTS))
def test_every_refused_request_is_refused_by_the_schema(why):
    bad = request(BAD_REQUESTS[why])
    with pytest.raises(ValidationError):
        GateRequest.model_validate(bad)  # what the gate runs on its input
    assert not schema_accepts("GateRequest", bad), why


@pytest.mark.parametrize("why", list(GOOD_REQUESTS))
def test_valid_requests_pass_the_schema(why):
    good = request(GOOD_REQUESTS[why])
    GateRequest.model_validate(good)
    errors = [e.message[:200] for e in validator("GateRequest").iter_errors(good)]
    assert errors == [], why


@pytest.mark.parametrize("why", list(GOOD_ANSWERS))
def test_valid_answers_pass_the_schema(why):
    errors = [e.message[:200] for e in validator("HumanAnswer").iter_errors(GOOD_ANSWERS[why])]
    assert errors == [], why


def test_the_schema_names_the_same_principals_and_gate_ids_as_the_validators():
    """One definition: the published pattern is the validator's regex. `re.fullmatch`
    reads "$" as JSON Schema's dialect does (the end of the input)."""
    props = DOC["schemas"]["GateRequest"]["properties"]
    names = HOSTILE_NAMES + ["alice", "a", "A9", "a.b_c@d-e", "x" * 64, "x\n", "é", "a b", "a:b", "a/b", "9"]
    for name in names:
        try:
            ok = check_principal(name) == name
        except ValueError:
            ok = False
        assert bool(re.fullmatch(props["principal"]["pattern"], name)) == ok, name
    for gid in ["g", "a/b:c@d", "g" * 200, "g" * 201, "", "/g", "g\n", "g h", "ü"]:
        try:
            ok = GateRequest.model_validate({**BASE, "gate_id": gid}).gate_id == gid
        except ValidationError:
            ok = False
        assert bool(re.fullmatch(props["gate_id"]["pattern"], gid)) == ok, gid


def test_every_payload_field_is_described():
    for name in ("GateRequest", "HumanAnswer", "Notice"):
        schema = DOC["schemas"][name]
        missing = [k for k, v in schema["properties"].items() if not v.get("description")]
        assert missing == [], (name, missing)
    assert DOC["interface"]["webhook"]["body"] == "Notice"


async def test_the_gate_refuses_each_bad_request_and_answer_the_schema_refuses(harness):
    """The same examples through a real worker: the gate fails at once on each bad
    request, and its `respond` update refuses each bad answer (the gate still waits),
    while a valid answer then goes through."""
    h = harness
    starts = {}
    for why, change in BAD_REQUESTS.items():
        bad = request(change)
        if "gate_id" not in change:
            bad["gate_id"] = f"bad-{uuid.uuid4().hex[:8]}"
        starts[why] = await h.client.start_workflow(
            c.GATE_WORKFLOW, bad, id=f"raw-{uuid.uuid4().hex[:8]}", task_queue=h.task_queue
        )
    for why, handle in starts.items():
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert getattr(failed.value.cause, "type", None) == INVALID_GATE_REQUEST, why

    req = h.request(h.principal(), escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    for why, bad in BAD_ANSWERS.items():
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("respond", bad, result_type=str)
        assert not schema_accepts("HumanAnswer", bad), why
    assert (await wait_escalated(h.client, req.gate_id)).dialog == []  # nothing was taken
    good = GOOD_ANSWERS["test_contract's"]
    await answer_gate(h.client, req.gate_id, HumanAnswer(**good))
    result = await handle.result()
    assert (result.action.value, result.responder) == ("approve", "cli")
    assert schema_accepts("GateResult", result.model_dump(mode="json"))


async def test_the_webhook_notice_matches_its_schema(temporal_env, embedder, settings):
    """What a real worker POSTs when a gate escalates and when its deadline passes."""
    from vicar.memory.registry import MemoryRegistry
    from vicar.worker import build_worker

    from .test_deadline import Receiver

    receiver = Receiver(fail_first=0)
    settings = settings.model_copy(update={"webhook_url": receiver.url})
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(temporal_env.client, settings, registry=registry, task_queue=task_queue)
    req = GateRequest(
        **{
            **BASE,
            "principal": f"p-{uuid.uuid4().hex[:8]}",
            "gate_id": f"g-{uuid.uuid4().hex[:8]}",
            "escalation_mode": "always",
            "deadline_seconds": 3,
        }
    )
    try:
        async with worker:
            handle = await start_gate(temporal_env.client, req, task_queue)
            result: GateResult = await asyncio.wait_for(handle.result(), 60)
    finally:
        registry.close()
        receiver.server.shutdown()
    assert result.timed_out
    bodies = [body for body, _ in receiver.posts]
    assert [b["event"] for b in bodies] == ["escalated", "timed_out"]
    for body in bodies:
        errors = [e.message[:200] for e in validator("Notice").iter_errors(body)]
        assert errors == [], body
    assert not schema_accepts("Notice", {**bodies[0], "event": "exploded"})
