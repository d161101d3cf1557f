"""The pre-review as an LLM predictor's grounded context (issue 27, item 3): the items go
into the posterior's prompt, numbered, with their sources, in the uncached tail; the
model cites them; a concern it raises that no cited item supports is marked unsupported.
The real `openai` and `anthropic` SDKs talk to local stand-ins of their APIs; the gate
runs on the real Temporal dev server with a real memory."""

from __future__ import annotations

import re
import uuid

import pytest
import pytest_asyncio

from vicar.client.gates import answer_gate, start_gate
from vicar.llm import prompts
from vicar.llm.openai_client import OpenAIClient
from vicar.memory.registry import MemoryRegistry
from vicar.models import AnsweredBy, ChunkSummary, GateRequest, HumanAnswer, PassResult, RetrievalContext
from vicar.proxy.llm_predictor import LLMPredictor

from .conftest import VicarHarness, record_answer, wait_escalated
from .llm_standins import AnthropicStandIn, OpenAIChatStandIn

ROLLBACK = "Where is the rollback step for the orders migration?"
TESTS = "This migration has no test for the orders table."
ARTIFACT = "ALTER TABLE orders ADD COLUMN total numeric;\n-- migration 0042 for the orders table\n"
MAIN, CLASSIFIER = "gpt-4.1", "gpt-4.1-mini"


def request(**kw) -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=kw.pop("gate_id", "g-new"),
        state="PLAN_ASSERT",
        task_type="db-migration",
        question="Approve or revise the proposed plan.",
        artifact_text=ARTIFACT,
        **kw,
    )


def chunk(i: int, text: str) -> ChunkSummary:
    return ChunkSummary(
        chunk_id=f"c{i}",
        gate_id=f"g-past-{i}",
        state="PLAN_ASSERT",
        task_type="db-migration",
        outcome="correct",
        answered_by=AnsweredBy.human,
        human_response=text,
        created_n=i,
        activation=0.5,
        similarity=0.8,
        score=0.7,
    )


CTX = RetrievalContext(
    principal="alice", n=9, phase="posterior", working_memory="Reviews migrations.", chunks=[chunk(1, ROLLBACK)]
)


@pytest.fixture
def openai_api(monkeypatch):
    s = OpenAIChatStandIn()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-standin-not-a-real-key")
    monkeypatch.setenv("OPENAI_BASE_URL", s.url)
    yield s
    s.close()


def posterior(api, reply: str) -> PassResult:
    api._script = lambda body: "correct" if body["model"] == CLASSIFIER else reply
    p = LLMPredictor(OpenAIClient(), MAIN, CLASSIFIER)
    prior = p.prior(request(), CTX.model_copy(update={"phase": "prior"}))
    return p.posterior(request(), CTX, ARTIFACT, prior)


def test_the_prompt_carries_the_items_numbered_with_their_sources_after_the_cached_prefix(openai_api):
    posterior(openai_api, f"{ROLLBACK} [1]\nCONFIDENCE: 0.7")
    bodies = [b for b in openai_api.bodies() if b["model"] == MAIN]
    prior_body, post_body = (OpenAIChatStandIn.user_text(b) for b in bodies)
    assert re.search(r"\[1\] \(correct at gate g-past-1, interaction 1\) " + re.escape(ROLLBACK), post_body)
    assert "cite" in post_body and "PRE-REVIEW" in post_body
    assert "PRE-REVIEW" not in prior_body  # only the posterior has read the artifact the items are ranked for
    # The cacheable prefix is the same for both passes: the items are per gate, in the tail.
    assert len({OpenAIChatStandIn.system_of(b) for b in bodies}) == 1
    assert ROLLBACK not in OpenAIChatStandIn.system_of(bodies[1])


def test_a_cited_concern_is_supported_and_the_markers_leave_the_answer(openai_api):
    post = posterior(openai_api, "Please add the rollback step [1].\nCONFIDENCE: 0.7")
    assert post.unsupported == []
    assert post.prose == "Please add the rollback step."
    assert [it.cited for it in post.prereview] == [True]
    # The classifier saw the reply without the markers too.
    asked = [OpenAIChatStandIn.user_text(b) for b in openai_api.bodies() if b["model"] == CLASSIFIER]
    assert "[1]" not in asked[-1]


def test_an_uncited_or_wrongly_cited_concern_is_unsupported(openai_api):
    post = posterior(
        openai_api,
        "Please add the rollback step [1]. The credentials leak into the logs. "
        "And there is no test for it [1].\nCONFIDENCE: 0.7",
    )
    assert post.unsupported == ["The credentials leak into the logs.", "And there is no test for it."]
    # An item number the prompt never showed supports nothing.
    post = posterior(openai_api, "Please add the rollback step [7].\nCONFIDENCE: 0.7")
    assert post.unsupported == ["Please add the rollback step."] and not any(it.cited for it in post.prereview)


# -- a real gate ----------------------------------------------------------------------


@pytest.fixture
def anthropic_api(monkeypatch):
    s = AnthropicStandIn()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", s.root)
    yield s
    s.close()


@pytest_asyncio.fixture
async def llm(temporal_env, embedder, settings, anthropic_api):
    from vicar.worker import build_worker

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    worker, _ = build_worker(
        temporal_env.client,
        settings,
        registry=registry,
        predictor=LLMPredictor.from_env("anthropic"),
        task_queue=task_queue,
    )
    async with worker:
        yield VicarHarness(temporal_env.client, task_queue, registry, settings)
    registry.close()


def script(body: dict) -> str:
    system = body["system"][0]["text"]
    if system == prompts.CLASSIFIER_SYSTEM:
        return "correct"
    if system == prompts.REVIEWER_SYSTEM:
        # Cites the rollback item by the number the prompt gave it.
        found = re.search(r"\[(\d)\] \([^)]*\) Where is the rollback", AnthropicStandIn.user_text(body))
        cite = f" [{found.group(1)}]" if found else ""
        return f"Please add the rollback step{cite}. The credentials leak into the logs.\nCONFIDENCE: 0.4"
    return '{"description": "The artifact.", "percepts": ["orders"]}'


async def test_a_gate_returns_the_unsupported_concern_beside_its_pre_review(llm, anthropic_api):
    anthropic_api._script = script
    principal = llm.principal()
    memory = llm.registry.get(principal)
    for i, text in enumerate((ROLLBACK, TESTS), 1):
        past = llm.request(principal, artifact=ARTIFACT, gate_id=f"g-past-{i}")
        record_answer(memory, past, i, "correct", text, predicted="correct")
    req = llm.request(principal, artifact=ARTIFACT)
    handle = await start_gate(llm.client, req, llm.task_queue)
    details = await wait_escalated(llm.client, req.gate_id)
    assert details.unsupported == ["The credentials leak into the logs."]
    assert {it.text for it in details.prereview} == {ROLLBACK, TESTS}
    await answer_gate(llm.client, req.gate_id, HumanAnswer(action="correct", text="Add it.", responder="ada"))
    result = await handle.result()
    assert result.unsupported == ["The credentials leak into the logs."]
    cited = [it for it in result.prereview if it.cited]
    assert [(it.text, it.gate_id) for it in cited] == [(ROLLBACK, "g-past-1")]
