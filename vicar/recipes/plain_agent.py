"""A plain Python agent: ask Vicar before each step that acts, skip what is refused.

verdicts = await run_plan(client, "alice", [("shell", "rm -rf build/"), ...])
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from temporalio.client import Client

from vicar.recipes.ask import Verdict, ask_vicar
from vicar.settings import TASK_QUEUE


async def run_plan(
    client: Client,
    principal: str,
    steps: Sequence[tuple[str, str]],
    act: Callable[[str, str], None],
    *,
    task_queue: str = TASK_QUEUE,
    wait: float = 600.0,
) -> list[Verdict]:
    """Each (tool, argument) is done by `act` only if Vicar allows it."""
    run_id = uuid.uuid4().hex
    verdicts = []
    for i, (tool, argument) in enumerate(steps):
        verdict = await ask_vicar(
            client,
            principal=principal,
            tool=tool,
            arguments=argument,
            call_id=str(i),
            scope=run_id,
            task_queue=task_queue,
            wait=wait,
        )
        if verdict.allowed:
            act(tool, argument)
        verdicts.append(verdict)
    return verdicts
