"""The one call every recipe makes: ask the person, through Vicar, before an agent acts.

A tool call becomes a gate (docs/orchestrator.md): its tool is the task type, its
arguments the artifact, its state an intent to act. Vicar answers alone where it has
earned it; otherwise the person answers from `vicar inbox`, the CLI or chat. The gate id
comes from the call's own id, so asking again after a crash attaches to the same gate.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from vicar.client import GateRequest, open_gate
from vicar.settings import TASK_QUEUE


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str  # the person's (or the proxy's) words; why not, when not allowed
    decided_by: str  # human, proxy, rule, nobody; "" while the person has not answered
    gate_id: str


async def ask_vicar(
    client: Client,
    *,
    principal: str,
    tool: str,
    arguments: Any,
    call_id: str,
    task_queue: str = TASK_QUEUE,
    wait: float = 600.0,
) -> Verdict:
    """Allowed only on an approve; no answer within `wait` seconds is not an allow (the
    gate stays with the person, and asking again with the same call id attaches to it)."""
    gate_id = "agent-" + hashlib.sha256(call_id.encode()).hexdigest()[:24]
    artifact = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    gate = await open_gate(
        client,
        GateRequest(
            principal=principal,
            gate_id=gate_id,
            state="INTENT_ASSERT",
            task_type=tool,
            question=f"May the agent call {tool}?",
            artifact_text=artifact,
        ),
        task_queue,
    )
    try:
        result = await gate.result(timeout=wait)
    except TimeoutError:
        return Verdict(False, f"no answer yet: gate {gate_id} waits for the person", "", gate_id)
    allowed = result.action.value == "approve"
    return Verdict(allowed, result.text, result.answered_by.value, gate_id)
