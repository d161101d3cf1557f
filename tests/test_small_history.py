"""A small history is not split by task type: a new person's first gate of a new task type
finds their answers on the others (30% of a new person's first 10 gates had no proposal
on the permission study's data when retrieval looked within the task type only)."""

from __future__ import annotations

from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.retrieval import SMALL_HISTORY, retrieve
from vicar.settings import MemoryParams


def share(i: int, task: str, data: str) -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type=task,
        question=f"Share {data} with Banking?",
        artifact_text=f"The agent wants to share your {data} with Banking.",
        lineage=f"Banking:{data}",
    )


def answer(memory: PrincipalMemory, request: GateRequest, n: int) -> None:
    record_outcome(
        memory,
        OutcomeRecord(
            request=request,
            n=n,
            workflow_id=f"w{n}",
            action=Action.approve,
            response_text="Yes, always share.",
            answered_by=AnsweredBy.human,
        ),
        artifacts=False,
    )


def test_a_small_history_is_read_across_task_types(tmp_path, embedder):
    memory = PrincipalMemory("alice", tmp_path, embedder, MemoryParams(), throwaway=True)
    try:
        for n in range(1, 6):
            answer(memory, share(n, "finance", ["Receipts", "Invoices", "Payslips", "Budgets", "Bills"][n - 1]), n)
        new_task = share(6, "travel", "Receipts")
        ctx = retrieve(memory, new_task, 6, "prior")
        assert ctx.chunks, "no memory found for the first gate of a new task type"
        assert OfflinePredictor().prior(new_task, ctx).action is Action.approve
        # A long history is split by task type as before.
        for n in range(7, SMALL_HISTORY + 7):
            answer(memory, share(n, "finance", f"Item {n}"), n)
        assert not retrieve(memory, share(99, "travel", "Receipts"), 99, "prior").chunks
    finally:
        memory.close()
