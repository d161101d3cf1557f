"""The storage decision for new gate chunks: persist, reinforce, buffer or drop, and never
a human answer's bookkeeping lost."""

from __future__ import annotations

import pytest

from vicar.memory.check import check
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.outcomes import record_outcome
from vicar.proxy.retrieval import retrieve
from vicar.settings import CalibrationParams, MemoryParams

from .conftest import rule_for

ON = MemoryParams(storage=True)
DROP = "Migration {n}: drop the column users.legacy_{c} from the production database. No rollback step."


def gate(i: int, artifact: str, title: str = "") -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve the migration plan?",
        artifact_text=artifact,
        title=title,
    )


def answer(
    mem: PrincipalMemory, i: int, artifact: str, action: str = "approve", text: str = "Fine.", title: str = ""
) -> str:
    guess = PassResult(prose="", confidence=0.9, action=Action.approve)
    return record_outcome(
        mem,
        OutcomeRecord(
            request=gate(i, artifact, title),
            n=i,
            workflow_id=f"vicar-gate/g{i}",
            action=Action(action),
            response_text=text,
            answered_by=AnsweredBy.human,
            prior=guess,
            posterior=guess,
        ),
        artifacts=False,
    )


@pytest.fixture
def open_memory(tmp_path, embedder):
    opened = []

    def make(params: MemoryParams = ON) -> PrincipalMemory:
        mem = PrincipalMemory("alice", tmp_path / "principals", embedder, params)
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()


def retrieved(mem: PrincipalMemory, i: int, artifact: str) -> list[str]:
    return [c.chunk_id for c in retrieve(mem, gate(i, artifact), i, "posterior", artifact).chunks]


def test_a_duplicate_reinforces_and_keeps_its_bookkeeping(open_memory, tmp_path):
    mem = open_memory()
    plan = DROP.format(n=1, c="email")
    first = answer(mem, 1, plan, title="[PATCH v1] users: drop legacy email")
    assert mem.last_storage.op == "persist"
    again = answer(mem, 2, plan, title="[PATCH v2] users: drop legacy email")
    assert (mem.last_storage.op, mem.last_storage.novelty, mem.last_storage.nearest) == ("reinforce", "low", first)
    chunk = mem.store.get_chunk(again)
    assert (chunk.status, chunk.superseded_by) == ("merged", first)
    assert mem.store.get_chunk(first).traces == [1, 2]  # presented again: a trace, not a chunk
    assert not mem.index.has_vector(again, "situation") and retrieved(mem, 3, plan) == [first]
    answer(mem, 2, plan, title="[PATCH v2] users: drop legacy email")  # a retry: nothing twice
    assert mem.store.get_chunk(first).traces == [1, 2]
    # The human's answer counts all the same: logged, a pair of the autonomy rule, in the
    # context's bookkeeping and the lineage's verdicts.
    assert mem.store.outcome_seq("vicar-gate/g2") is not None
    assert rule_for(mem, gate(3, plan), CalibrationParams()).evidence == 2
    assert [
        h.n
        for h in retrieve(
            mem, gate(3, plan, "[PATCH v3] users: drop legacy email"), 3, "posterior", plan
        ).lineage_history
    ] == [2, 1]
    # Reopened, the record without vectors is not mistaken for lost vectors.
    mem.close()
    mem = open_memory()
    assert mem.rebuilt_on_open is None and retrieved(mem, 3, plan) == [first]
    assert check(tmp_path / "principals", "alice", False).healthy


def test_a_human_reversal_always_persists(open_memory):
    mem = open_memory()
    plan = DROP.format(n=1, c="email")
    answer(mem, 1, plan, "reject", "No rollback step.")
    answer(mem, 2, plan, "reject", "No rollback step.")
    assert mem.last_storage.op == "persist" and len(retrieved(mem, 3, plan)) == 2


def test_a_near_one_is_buffered_and_kept_only_if_met_again(open_memory):
    mem = open_memory()
    answer(mem, 1, DROP.format(n=1, c="email"))
    answer(mem, 2, DROP.format(n=2, c="phone"))
    assert (mem.last_storage.op, mem.last_storage.novelty, mem.last_storage.relevance) == ("persist", "mid", "high")
    # Near an old memory (activation -2.6: mid relevance at tau -5): buffered.
    near = answer(mem, 200, DROP.format(n=3, c="fax"))
    assert (mem.last_storage.op, mem.last_storage.relevance) == ("buffer", "mid")
    assert mem.store.get_chunk(near).status == "buffered" and near in retrieved(mem, 201, DROP.format(n=3, c="fax"))
    met = answer(mem, 400, DROP.format(n=4, c="pager"))
    assert mem.last_storage.op == "buffer"
    mem.reinforce([met], 401)  # the proxy used it at a later gate
    assert mem.settle_buffer() == (1, 1)
    assert mem.store.get_chunk(near).status == "dropped" and mem.store.get_chunk(met).status == "active"
    assert near not in retrieved(mem, 402, DROP.format(n=3, c="fax"))
    assert mem.store.outcome_seq("vicar-gate/g200") is not None  # its answer is still on the books


def test_a_duplicate_of_a_fading_memory_is_dropped(open_memory):
    mem = open_memory()
    plan = DROP.format(n=1, c="email")
    answer(mem, 1, plan)
    dropped = answer(mem, 5000, plan)  # activation -4.3: low relevance at tau -5
    assert (mem.last_storage.op, mem.last_storage.relevance) == ("drop", "low")
    assert mem.store.get_chunk(dropped).status == "dropped" and mem.store.outcome_seq("vicar-gate/g5000")


def test_off_every_chunk_persists(open_memory):
    mem = open_memory(MemoryParams())
    plan = DROP.format(n=1, c="email")
    answer(mem, 1, plan)
    answer(mem, 2, plan)
    assert mem.last_storage is None and len(retrieved(mem, 3, plan)) == 2
