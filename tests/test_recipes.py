"""The recipes in vicar/recipes/ (docs/recipes.md), each run against a real worker:
the OpenAI Agents SDK's tool approvals (its model a local Chat Completions stand-in),
LangGraph's interrupt, and a plain Python agent. A rule answers at once; otherwise the
test answers as the person, from the list of waiting gates."""

from __future__ import annotations

import asyncio

from vicar.client import add_rule, answer, list_escalations
from vicar.recipes.langgraph_agent import build_graph
from vicar.recipes.langgraph_agent import run_with_vicar as run_graph
from vicar.recipes.openai_agents import build_agent
from vicar.recipes.openai_agents import run_with_vicar as run_agent
from vicar.recipes.plain_agent import run_plan

from .conftest import wait_for
from .llm_standins import OpenAIChatStandIn, Reply


async def answer_next(h, principal: str, action: str, text: str) -> str:
    """Answer, as the person, the principal's first gate that waits for them."""

    async def waiting():
        return await list_escalations(h.client, principal)

    gate = (await wait_for(waiting))[0]
    await answer(h.client, gate.gate_id, dict(action=action, text=text, responder="alice"))
    return gate.gate_id


async def test_plain_agent_acts_on_a_rule_and_not_on_a_refusal(harness):
    h = harness
    p = h.principal()
    await add_rule(h.client, p, dict(name="ls-ok", effect="approve", words=["ls"]), by="alice", task_queue=h.task_queue)
    done: list[str] = []
    plan = [("shell", "ls build/"), ("shell", "rm -rf /srv/data")]
    run = asyncio.create_task(run_plan(h.client, p, plan, lambda _t, arg: done.append(arg), task_queue=h.task_queue))
    await answer_next(h, p, "reject", "Never delete /srv.")
    verdicts = await run
    assert [v.allowed for v in verdicts] == [True, False] and done == ["ls build/"]
    assert verdicts[0].decided_by == "rule" and (verdicts[1].decided_by, verdicts[1].reason) == (
        "human",
        "Never delete /srv.",
    )


async def test_langgraph_resumes_with_the_persons_answer(harness):
    h = harness
    p = h.principal()
    ran: list[str] = []
    graph = build_graph(lambda cmd: ran.append(cmd) or "dropped")
    run = asyncio.create_task(
        run_graph(graph, h.client, p, {"command": "DROP TABLE tmp_import"}, task_queue=h.task_queue)
    )
    await answer_next(h, p, "approve", "Fine, it is a scratch table.")
    state, verdicts = await run
    assert state["outcome"] == "dropped" and ran == ["DROP TABLE tmp_import"]
    assert len(verdicts) == 1 and verdicts[0].decided_by == "human"

    run = asyncio.create_task(run_graph(graph, h.client, p, {"command": "DROP TABLE users"}, task_queue=h.task_queue))
    await answer_next(h, p, "reject", "Not the users table.")
    state, _ = await run
    assert state["outcome"] == "refused: Not the users table." and ran == ["DROP TABLE tmp_import"]


async def test_openai_agents_tool_runs_only_after_an_approve(harness):
    from agents import OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # the SDK would export its traces to OpenAI
    h = harness
    p = h.principal()
    standin = OpenAIChatStandIn()
    try:
        model = OpenAIChatCompletionsModel(
            model="stand-in", openai_client=AsyncOpenAI(base_url=standin.url, api_key="x")
        )
        ran: list[str] = []
        agent = build_agent(model, lambda cmd: ran.append(cmd) or "cleaned")

        call = {"id": "call_1", "name": "shell", "arguments": {"command": "make clean"}}
        standin.push(Reply("", tool_calls=[call]), Reply("Done: the build is clean."))
        run = asyncio.create_task(run_agent(agent, "Clean the build.", h.client, p, task_queue=h.task_queue))
        await answer_next(h, p, "approve", "Go ahead.")
        result, verdicts = await run
        assert ran == ["make clean"] and result.final_output == "Done: the build is clean."
        assert [v.decided_by for v in verdicts] == ["human"]
        tool_messages = [m for m in standin.bodies()[-1]["messages"] if m["role"] == "tool"]
        assert tool_messages and tool_messages[-1]["content"] == "cleaned"

        call = {"id": "call_2", "name": "shell", "arguments": {"command": "rm -rf ~"}}
        standin.push(Reply("", tool_calls=[call]), Reply("I did not run it."))
        run = asyncio.create_task(run_agent(agent, "Free some space.", h.client, p, task_queue=h.task_queue))
        await answer_next(h, p, "reject", "Never the home directory.")
        result, verdicts = await run
        assert ran == ["make clean"] and not verdicts[0].allowed
        tool_messages = [m for m in standin.bodies()[-1]["messages"] if m["role"] == "tool"]
        assert "Never the home directory." in tool_messages[-1]["content"]
    finally:
        standin.close()


async def test_a_reused_tool_call_id_is_another_gate_never_another_calls_answer(harness):
    """Models reuse call ids (`call_1` in every run): a new run's `call_1` is asked anew,
    whether its arguments differ (before: Conflict, the recipe crashed) or not (before: the
    old gate's approve, given again without asking)."""
    from agents import OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    h = harness
    p = h.principal()
    standin = OpenAIChatStandIn()
    try:
        model = OpenAIChatCompletionsModel(
            model="stand-in", openai_client=AsyncOpenAI(base_url=standin.url, api_key="x")
        )
        ran: list[str] = []
        agent = build_agent(model, lambda cmd: ran.append(cmd) or "ok")
        for command, action in (("make clean", "approve"), ("rm -rf build", "reject"), ("make clean", "reject")):
            call = {"id": "call_1", "name": "shell", "arguments": {"command": command}}
            standin.push(Reply("", tool_calls=[call]), Reply("Done."))
            run = asyncio.create_task(run_agent(agent, "Clean.", h.client, p, task_queue=h.task_queue))
            await answer_next(h, p, action, "as I say")
            _, verdicts = await run
            assert [v.allowed for v in verdicts] == [action == "approve"] and verdicts[0].decided_by == "human"
        assert ran == ["make clean"]
    finally:
        standin.close()


async def test_ask_vicar_refuses_what_it_cannot_ask(harness):
    from vicar.recipes.ask import ask_vicar

    verdict = await ask_vicar(
        harness.client, principal="bad principal!", tool="shell", arguments="ls", call_id="c", task_queue="q"
    )
    assert not verdict.allowed and verdict.reason.startswith("Vicar could not ask")
