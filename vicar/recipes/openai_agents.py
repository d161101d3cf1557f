"""The OpenAI Agents SDK: a tool declared `needs_approval=True` interrupts the run; Vicar
answers each interruption and the run resumes from its state.

    agent = build_agent(model, run_command)
    result, verdicts = await run_with_vicar(agent, "Clean the build directory.", client, "alice")
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from agents import Agent, Model, Runner, function_tool
from temporalio.client import Client

from vicar.recipes.ask import Verdict, ask_vicar
from vicar.settings import TASK_QUEUE


def build_agent(model: Model | str, run_command: Callable[[str], str]) -> Agent:
    @function_tool(needs_approval=True)
    def shell(command: str) -> str:
        """Run a shell command."""
        return run_command(command)

    return Agent(name="Builder", instructions="Use the shell tool when asked.", tools=[shell], model=model)


async def run_with_vicar(
    agent: Agent,
    prompt: str,
    client: Client,
    principal: str,
    *,
    task_queue: str = TASK_QUEUE,
    wait: float = 600.0,
    run_id: str | None = None,
) -> tuple[Any, list[Verdict]]:
    """Run the agent, asking Vicar at each interruption. `run_id` scopes the tool-call
    ids (models reuse `call_1` from run to run): give the same one to ask again for the
    same calls after a crash; by default a new run."""
    scope = run_id or uuid.uuid4().hex
    result = await Runner.run(agent, prompt)
    verdicts = []
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            raw = item.raw_item
            verdict = await ask_vicar(
                client,
                principal=principal,
                tool=item.name or "tool",
                arguments=getattr(raw, "arguments", None) or "",
                call_id=getattr(raw, "call_id", None) or str(id(item)),
                scope=scope,
                task_queue=task_queue,
                wait=wait,
            )
            verdicts.append(verdict)
            if verdict.allowed:
                state.approve(item)
            else:
                state.reject(item, rejection_message=verdict.reason or "refused by the person")
        result = await Runner.run(agent, state)
    return result, verdicts
