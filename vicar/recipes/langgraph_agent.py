"""LangGraph: a node pauses with `interrupt`, Vicar answers, the graph resumes with
`Command(resume=...)`.

    graph = build_graph(done)
    verdict = await run_with_vicar(graph, client, "alice", {"command": "DROP TABLE tmp"})
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from temporalio.client import Client

from vicar.recipes.ask import Verdict, ask_vicar
from vicar.settings import TASK_QUEUE


class State(TypedDict, total=False):
    command: str
    outcome: str


def build_graph(run_command: Callable[[str], str]) -> Any:
    def guarded(state: State) -> State:
        # Pauses the graph here; the value given to Command(resume=...) is returned.
        approved = interrupt({"tool": "shell", "arguments": state["command"]})
        if not approved["allowed"]:
            return {"outcome": f"refused: {approved['reason']}"}
        return {"outcome": run_command(state["command"])}

    builder = StateGraph(State)
    builder.add_node("guarded", guarded)
    builder.add_edge(START, "guarded")
    builder.add_edge("guarded", END)
    return builder.compile(checkpointer=InMemorySaver())


async def run_with_vicar(
    graph: Any,
    client: Client,
    principal: str,
    state: State,
    *,
    task_queue: str = TASK_QUEUE,
    wait: float = 600.0,
) -> tuple[State, list[Verdict]]:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    result = await graph.ainvoke(state, config)
    verdicts = []
    while result.get("__interrupt__"):
        pause = result["__interrupt__"][0]
        verdict = await ask_vicar(
            client,
            principal=principal,
            tool=pause.value["tool"],
            arguments=pause.value["arguments"],
            call_id=str(pause.id),
            scope=config["configurable"]["thread_id"],
            task_queue=task_queue,
            wait=wait,
        )
        verdicts.append(verdict)
        resume = {"allowed": verdict.allowed, "reason": verdict.reason}
        result = await graph.ainvoke(Command(resume=resume), config)
    return result, verdicts
