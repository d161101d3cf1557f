"""The side files beside a principal's memory (proxy-interactions.jsonl, proxy-patterns.md)
hold every recorded outcome exactly once, like the store, however many answers race:
several clients answering the same gates at once (signals and updates), and the
record_outcome activity run twice for one gate (a retry) from two threads at once.

Real Temporal dev server and worker (`harness`), real SQLite, Chroma and embedder."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter

from temporalio.client import Client

from vicar import contracts as c
from vicar.client.gates import answer_gate, start_gate
from vicar.errors import VicarError
from vicar.models import GateResult, HumanAnswer, OutcomeRecord
from vicar.proxy.outcomes import INTERACTIONS_FILE, record_outcome
from vicar.proxy.outcomes import side_file_gates as side_file_counts
from vicar.runtime.codec import data_converter

from .conftest import wait_escalated

GATES = 20
CLIENTS = 3


def stored_gates(memory) -> Counter:
    return Counter(OutcomeRecord.model_validate_json(r).request.gate_id for _, r in memory.store.outcomes())


async def test_concurrent_duplicate_answers_write_each_outcome_once(harness, temporal_env):
    principal = harness.principal()
    reqs = [
        harness.request(principal, gate_id=f"side-{principal}-{i:02d}", question=f"Approve plan {i}?")
        for i in range(GATES)
    ]
    await asyncio.gather(*(start_gate(harness.client, r, task_queue=harness.task_queue) for r in reqs))
    # A new principal asks the human every time; all gates wait at once.
    await asyncio.gather(*(wait_escalated(harness.client, r.gate_id) for r in reqs))

    target = temporal_env.client.service_client.config.target_host
    clients = [harness.client] + [
        await Client.connect(target, data_converter=data_converter()) for _ in range(CLIENTS - 1)
    ]
    accepted: Counter = Counter()

    async def by_update(client: Client, gate_id: str, k: int) -> None:
        try:
            await answer_gate(client, gate_id, HumanAnswer(action="approve", text=f"ok from {k}", responder=principal))
            accepted[gate_id] += 1
        except VicarError:
            pass  # another answer came first

    async def by_signal(client: Client, gate_id: str, k: int) -> None:
        await client.get_workflow_handle(c.gate_workflow_id(gate_id)).signal(
            "human_response", HumanAnswer(action="correct", text=f"fix it, from {k}", responder=principal)
        )

    sends = []
    for r in reqs:
        for k, client in enumerate(clients):
            sends.append(by_update(client, r.gate_id, k))
            sends.append(by_signal(client, r.gate_id, k))
    await asyncio.wait_for(asyncio.gather(*sends), 120)
    results = await asyncio.wait_for(
        asyncio.gather(
            *(
                harness.client.get_workflow_handle(c.gate_workflow_id(r.gate_id), result_type=GateResult).result()
                for r in reqs
            )
        ),
        120,
    )
    assert all(res.escalated for res in results)
    assert all(n <= 1 for n in accepted.values()), accepted  # the gate took one answer

    memory = harness.registry.get(principal)
    want = Counter(r.gate_id for r in reqs)
    assert stored_gates(memory) == want
    lines, sections = side_file_counts(memory.dir)
    assert lines == want, {g: n for g, n in lines.items() if n != 1}
    assert sections == want, {g: n for g, n in sections.items() if n != 1}
    # What the side files say is what the store says (the answer that won, for each gate).
    stored = {
        OutcomeRecord.model_validate_json(r).workflow_id: OutcomeRecord.model_validate_json(r).action.value
        for _, r in memory.store.outcomes()
    }
    written = {
        json.loads(x)["workflow_id"]: json.loads(x)["action"]
        for x in (memory.dir / INTERACTIONS_FILE).read_text().splitlines()
        if x.strip()
    }
    assert written == stored


def test_a_retried_record_outcome_racing_itself_writes_nothing_twice(harness):
    """The same gate's record_outcome in two threads at once (Temporal retried an attempt
    it thought lost while the first still ran), for several gates at once."""
    from .test_outcomes import outcome

    principal = harness.principal()
    memory = harness.registry.get(principal)
    records = [
        outcome(i).model_copy(update={"request": outcome(i).request.model_copy(update={"principal": principal})})
        for i in range(1, 9)
    ]
    start = threading.Barrier(len(records) * 2)
    errors: list[BaseException] = []

    def run(rec: OutcomeRecord) -> None:
        try:
            start.wait()
            record_outcome(memory, rec)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(rec,)) for rec in records for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    want = Counter(r.request.gate_id for r in records)
    assert stored_gates(memory) == want
    assert side_file_counts(memory.dir) == (want, want)
    record_outcome(memory, records[0])  # once more, alone: still nothing twice
    assert side_file_counts(memory.dir) == (want, want)
