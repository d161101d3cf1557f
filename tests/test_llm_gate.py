"""The gate with an LLM predictor end to end: real Temporal dev server, real memory,
the real anthropic SDK talking to a local stand-in of the Messages API. The dialog loop,
its bound, malformed output, provider failures and the cached prefix."""

from __future__ import annotations

import re
import uuid

import pytest
import pytest_asyncio

from vicar.client.gates import answer_gate, start_gate
from vicar.llm import prompts
from vicar.memory.registry import MemoryRegistry
from vicar.models import Action, AnsweredBy, GateRequest, HumanAnswer
from vicar.proxy.llm_predictor import LLMPredictor

from .conftest import VicarHarness, wait_escalated
from .llm_standins import AnthropicStandIn, Fail, Reply

ASK = "What is the rollback plan if the index build locks the table?"
AGENT = "We build it CONCURRENTLY; rollback is DROP INDEX CONCURRENTLY."
APPROVE = "Approved, thanks for answering."


def kind_of(body: dict) -> str:
    system = body["system"][0]["text"]
    if system == prompts.REVIEWER_SYSTEM:
        return "pass"
    if system == prompts.CLASSIFIER_SYSTEM:
        return "classify"
    if system == prompts.AGENT_SYSTEM:
        return "agent"
    return "surprise"


def reply_of(body: dict) -> str:
    """The reply the classifier is asked about (inside its REPLY fence)."""
    text = AnthropicStandIn.user_text(body)
    found = re.search(r"<<<BEGIN REPLY \w+>>>\n(.*)\n<<<END REPLY", text, re.S)
    assert found, text
    return found.group(1)


class Reviewer:
    """Scripts the stand-in: `passes` maps "no dialog"/"dialog" to the pass reply; the
    classifier says dialog for a question and approve otherwise."""

    def __init__(self, first: str, later: str = APPROVE + "\nCONFIDENCE: 0.9", agent: str = AGENT):
        self.first, self.later, self.agent = first, later, agent

    def __call__(self, body: dict):
        kind = kind_of(body)
        if kind == "pass":
            has_dialog = "<<<BEGIN DIALOG" in AnthropicStandIn.user_text(body)
            return Reply(
                self.later if has_dialog else self.first,
                usage={"input_tokens": 200, "cache_read_input_tokens": 450, "output_tokens": 40},
            )
        if kind == "classify":
            return "dialog" if reply_of(body).rstrip().endswith("?") else "approve"
        if kind == "agent":
            return self.agent
        return '{"description": "The artifact settled it.", "percepts": ["index", "rollback"]}'


@pytest.fixture
def standin(monkeypatch):
    s = AnthropicStandIn()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", s.root)
    yield s
    s.close()


@pytest_asyncio.fixture
async def llm(temporal_env, embedder, settings, standin):
    from vicar.worker import build_worker

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
    predictor = LLMPredictor.from_env("anthropic")
    worker, _ = build_worker(
        temporal_env.client, settings, registry=registry, predictor=predictor, task_queue=task_queue
    )
    async with worker:
        yield VicarHarness(temporal_env.client, task_queue, registry, settings)
    registry.close()


def gate(h, **kw) -> GateRequest:
    return h.request(
        h.principal(),
        artifact="CREATE INDEX CONCURRENTLY users_email ON users(email);",
        actor_message="Plan: add the index.",
        **kw,
    )


async def test_proxy_dialog_then_approval_becomes_a_correction(llm, standin):
    standin._script = Reviewer(first=ASK + "\nCONFIDENCE: 0.9")
    req = gate(llm, escalation_mode="never")  # a new principal: only `never` lets the proxy act
    result = await (await start_gate(llm.client, req, llm.task_queue)).result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy
    assert [(t.speaker, t.text) for t in result.dialog] == [("reviewer", ASK), ("agent", AGENT)]
    # The design: dialog then approve -> correct, the dialog as feedback for the agents.
    assert result.action is Action.correct and ASK in result.text and AGENT in result.text
    passes = [b for b in standin.bodies() if kind_of(b) == "pass"]
    assert len(passes) == 4  # prior + posterior, twice
    # One cacheable prefix for every pass of the gate; only the body varies.
    assert len({str(b["system"]) for b in passes}) == 1
    assert passes[0]["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in str(b["messages"]) for b in passes)
    # Usage: 4 passes x (main + classifier) + 1 agent reply, all priced.
    assert result.usage.calls == 9 and result.usage.cache_read_tokens == 4 * 450 and result.usage.cost_usd > 0


async def test_dialog_is_bounded_and_then_the_human_decides(llm, standin):
    standin._script = Reviewer(first=ASK + "\nCONFIDENCE: 0.95", later="And the lock time?\nCONFIDENCE: 0.95")
    req = gate(llm, escalation_mode="never")  # even in never mode the bound escalates
    handle = await start_gate(llm.client, req, llm.task_queue)
    details = await wait_escalated(llm.client, req.gate_id)
    assert sum(t.speaker == "reviewer" for t in details.dialog) == llm.settings.max_dialog_turns
    assert "dialog bound" in details.calibration_note
    await answer_gate(llm.client, req.gate_id, HumanAnswer(action="approve", text="Fine.", responder="alice"))
    result = await handle.result()
    assert result.answered_by is AnsweredBy.human and result.action is Action.correct


async def test_an_empty_agent_reply_never_loops(llm, standin):
    standin._script = Reviewer(first=ASK + "\nCONFIDENCE: 0.95", agent="")
    req = gate(llm, escalation_mode="never")
    handle = await start_gate(llm.client, req, llm.task_queue)
    details = await wait_escalated(llm.client, req.gate_id)
    assert [(t.speaker, t.text) for t in details.dialog] == [("reviewer", ASK)]  # asked, unanswered
    agent_calls = [b for b in standin.bodies() if kind_of(b) == "agent"]
    assert len(agent_calls) == 1
    await handle.terminate()


@pytest.mark.parametrize(
    "reply",
    [
        "Approved.",  # no CONFIDENCE line
        "Approved.\nCONFIDENCE: very high",
        "CONFIDENCE: 1.0",  # a bare confidence is no prediction
    ],
)
async def test_malformed_output_never_auto_approves(llm, standin, reply):
    from vicar.models import OutcomeRecord, PassResult
    from vicar.proxy.outcomes import record_outcome

    standin._script = Reviewer(first=reply, later=reply)
    req = gate(llm)
    # A record of right answers at score 0 (the loose test rule): still no action on it. The
    # betting rule's thresholds are a grid above 0, so none is ever proven at 0 either.
    memory = llm.registry.get(req.principal)
    for i in range(1, 4):
        guess = PassResult(prose="Approved.", confidence=0.0, action=Action.approve)
        record_outcome(
            memory,
            OutcomeRecord(
                request=req.model_copy(update={"gate_id": f"seed-{i}"}),
                n=i,
                workflow_id=f"seed-{i}",
                action=Action.approve,
                response_text="ok",
                answered_by=AnsweredBy.human,
                prior=guess,
                posterior=guess,
            ),
        )
        memory.raise_counter(i)
    handle = await start_gate(llm.client, req, llm.task_queue)
    details = await wait_escalated(llm.client, req.gate_id)
    assert details.proxy_confidence == 0.0
    # No action (nothing for the person's answers to back) or no confidence: never a lone answer.
    assert details.calibration_guard in ("unsupported", "unproven"), details.calibration_guard
    note = details.calibration_note
    assert "no guess" in note or note.startswith("no threshold proven"), note
    await handle.terminate()


async def test_the_human_can_ask_the_agents_before_deciding(llm, standin):
    standin._script = Reviewer(first="Looks plausible.\nCONFIDENCE: 0.3")
    req = gate(llm)
    handle = await start_gate(llm.client, req, llm.task_queue)
    await wait_escalated(llm.client, req.gate_id)
    await answer_gate(llm.client, req.gate_id, HumanAnswer(action="dialog", text=ASK, responder="alice"))

    async def answered():
        d = await wait_escalated(llm.client, req.gate_id)
        return d if len(d.dialog) == 2 else None

    from .conftest import wait_for

    details = await wait_for(answered)
    assert [(t.speaker, t.answered_by) for t in details.dialog] == [("reviewer", AnsweredBy.human), ("agent", None)]
    await answer_gate(llm.client, req.gate_id, HumanAnswer(action="approve", text="OK then.", responder="alice"))
    result = await handle.result()
    assert result.action is Action.correct and AGENT in result.text
    record = llm.registry.get(req.principal).store.outcomes()[-1][1]
    assert ASK in record and AGENT in record  # the dialog is in the outcome log


async def test_a_rejected_key_escalates_at_once_with_the_reason(llm, standin):
    standin._script = lambda body: Fail(401, "authentication_error", "invalid x-api-key")
    req = gate(llm)
    handle = await start_gate(llm.client, req, llm.task_queue)
    details = await wait_escalated(llm.client, req.gate_id)
    assert details.calibration_guard == "proxy_error"
    assert "401" in details.calibration_note and "sk-ant-test" not in details.calibration_note
    assert len(standin.requests) == 1  # non-retryable: no second attempt
    await handle.terminate()


async def test_a_flaky_provider_is_retried_by_temporal(llm, standin):
    reviewer = Reviewer(first=APPROVE + "\nCONFIDENCE: 0.9")
    calls = {"n": 0}

    def flaky(body):
        calls["n"] += 1
        if calls["n"] == 1:
            return Fail(529, "overloaded_error", "overloaded", headers={"retry-after": "0"})
        return reviewer(body)

    standin._script = flaky
    req = gate(llm, escalation_mode="never")
    result = await (await start_gate(llm.client, req, llm.task_queue)).result()
    assert not result.escalated and result.action is Action.approve
    assert kind_of(standin.bodies()[0]) == kind_of(standin.bodies()[1]) == "pass"  # the same call, again


async def test_gates_of_a_session_share_one_cached_prefix(llm, standin):
    import json

    from vicar import contracts as c
    from vicar.models import OutcomeRecord
    from vicar.models.session import SessionSummary
    from vicar.proxy.outcomes import record_outcome

    standin._script = Reviewer(first=APPROVE + "\nCONFIDENCE: 0.9")
    p = llm.principal()
    memory = llm.registry.get(p)
    earlier = llm.request(p, artifact="CREATE INDEX users_name ON users(name);")
    record_outcome(
        memory,
        OutcomeRecord(
            request=earlier,
            n=1,
            workflow_id="earlier",
            action=Action.correct,
            response_text="Build indexes CONCURRENTLY.",
            answered_by=AnsweredBy.human,
        ),
    )
    memory.raise_counter(1)
    results = []
    for i in range(2):
        req = llm.request(
            p, artifact=f"CREATE INDEX CONCURRENTLY idx_{i} ON users(email);", session_id="s1", escalation_mode="never"
        )
        results.append(await (await start_gate(llm.client, req, llm.task_queue)).result())
    passes = [b for b in standin.bodies() if kind_of(b) == "pass"]
    assert len(passes) == 4
    # One prefix for both passes of both gates: the system prompt and the session's working memory.
    assert len({json.dumps(b["system"]) for b in passes}) == 1
    prefix = passes[0]["system"]
    assert len(prefix) == 2 and "Build indexes CONCURRENTLY." in prefix[1]["text"]
    assert prefix[1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in prefix[0]
    session = llm.client.get_workflow_handle(c.session_workflow_id(p, "s1"))
    summary = await session.query("summary", result_type=SessionSummary)
    assert [g.done for g in summary.gates] == [True, True] and summary.working_memory_chunks == 1
    assert summary.usage.calls == sum(r.usage.calls for r in results)
    assert summary.usage.cache_savings_usd == pytest.approx(sum(r.usage.cache_savings_usd for r in results))
    assert summary.usage.cache_savings_usd > 0  # 4 passes read 450 cached tokens each
    await session.signal("end")
    done = SessionSummary.model_validate(await session.result())
    assert done.status == "done" and done.ended_by == "signal" and done.consolidation is not None


async def run_answered(h, req: GateRequest, action: str):
    """Run a gate; if it escalates, answer it as the human. (result, details when escalated)"""
    from vicar.client.gates import gate_details
    from vicar.models import GateStatus

    from .conftest import wait_for

    handle = await start_gate(h.client, req, h.task_queue)

    async def settled():
        if (await handle.describe()).status.name != "RUNNING":
            return "done"
        d = await gate_details(h.client, req.gate_id)
        return d if d and d.status is GateStatus.escalated else None

    details = await wait_for(settled)
    if details == "done":
        return await handle.result(), None
    await answer_gate(h.client, req.gate_id, HumanAnswer(action=action, text="ok", responder="alice"))
    return await handle.result(), details


async def test_a_confident_model_earns_autonomy_only_by_measured_agreement(llm, standin):
    """The model says approve at 0.99 on every gate. A new principal's first gate (a
    production table!) still goes to the human; after enough agreeing human answers the
    bound passes and the proxy acts alone; when audited gates start failing it loses
    autonomy again."""
    from vicar.proxy.autonomy import audit_draw
    from vicar.proxy.autonomy.rule import AUTONOMY_FILE

    standin._script = Reviewer(first="Approved.\nCONFIDENCE: 0.99")
    p = llm.principal()
    # A looser target so 21 answers suffice (the default 5% needs 100); half the gates
    # the rule lets through are audited, so evidence keeps coming.
    d = llm.settings.principals_dir / p
    d.mkdir(parents=True, exist_ok=True)
    (d / AUTONOMY_FILE).write_text('{"target_error": 0.25, "audit_share": 0.5}')

    def req(i: int, audited: bool) -> GateRequest:
        gid = next(
            f"earn-{p}-{i}-{j}" for j in range(1000) if (audit_draw(p, f"vicar-gate/earn-{p}-{i}-{j}") < 0.5) == audited
        )
        return llm.request(
            p,
            gate_id=gid,
            question="Approve adding a column to the users table in production?",
            artifact="ALTER TABLE users ADD COLUMN nickname text;",
        )

    first, details = await run_answered(llm, req(0, audited=False), "approve")
    # A kind of action the person never answered: the model's 0.99 counts for nothing yet.
    assert first.escalated and details.calibration_guard == "unsupported"
    assert details.proxy_action is Action.approve and details.proxy_confidence == 0.99
    assert "not answered before" in details.calibration_note
    # The betting rule (valid whenever read, four sequences at delta/4) needs 21 agreeing answers.
    for i in range(1, 21):
        result, details = await run_answered(llm, req(i, audited=False), "approve")
        # Their own answers back it from the third on; the bound proves nothing before the 21st.
        assert result.escalated and details.calibration_guard == ("unsupported" if i < 3 else "unproven"), i
    assert result.autonomy_evidence == 20 and result.autonomy_threshold is None
    alone, _ = await run_answered(llm, req(21, audited=False), "approve")
    assert not alone.escalated and alone.answered_by is AnsweredBy.proxy and alone.action is Action.approve
    assert (alone.autonomy_threshold, alone.autonomy_evidence) == (0.99, 21) and alone.autonomy_bound <= 0.25
    # The proxy's own answer is no evidence: the next unaudited gate sees the same 21.
    again, _ = await run_answered(llm, req(22, audited=False), "approve")
    assert not again.escalated and again.autonomy_evidence == 21
    # An audited gate goes to the human, who rejects: the bet loses most of its wealth.
    audited, details = await run_answered(llm, req(23, audited=True), "reject")
    assert audited.escalated and details.calibration_guard == "audit"
    lost, details = await run_answered(llm, req(24, audited=False), "reject")
    # The rule itself has lost its threshold. The first guard to say so may be the memory's
    # own tension (the human's reject next to eleven approves of the same case, when
    # retrieval brings both), which comes first in the guards' order.
    assert lost.escalated and lost.answered_by is AnsweredBy.human
    assert lost.autonomy_threshold is None and lost.autonomy_evidence == 22
    assert round(lost.autonomy_bound, 3) == 0.4
    # Or support: the person's reject now stands among their answers of the kind.
    assert details.calibration_guard in ("unproven", "tension", "unsupported"), details.calibration_guard
    if details.calibration_guard == "unproven":
        assert details.calibration_note.startswith("no threshold proven: bound 0.400 over 22 answers")
