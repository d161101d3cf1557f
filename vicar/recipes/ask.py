"""The one call every recipe makes: ask the person, through Vicar, before an agent acts.

A tool call becomes a gate (docs/orchestrator.md): its tool is the task type, its
arguments the artifact, its state an intent to act. Vicar answers alone where it has
earned it; otherwise the person answers from `vicar inbox`, the CLI or chat.

The gate id comes from the call itself: the principal, the run it belongs to (`scope`),
the call's own id, the tool and its arguments. Asking again for the same call after a
crash (same scope) attaches to the same gate. A call id used again for another call
(models and SDKs reuse `call_1`), or in another run, is another gate: never another
call's answer, and never a conflict that would crash the agent. Anything that still
fails to open the gate is a refusal, never an allow.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from vicar.client import GateRequest, open_gate
from vicar.errors import VicarError
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
    scope: str = "",
    task_queue: str = TASK_QUEUE,
    wait: float = 600.0,
) -> Verdict:
    """Allowed only on an approve; no answer within `wait` seconds is not an allow (the
    gate stays with the person, and asking again for the same call in the same `scope`
    attaches to it). `scope`: the run the call belongs to (a run id, a thread id)."""
    artifact = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    gate_id = gate_id_for(principal, scope, call_id, tool, artifact)
    try:
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
    except (VicarError, ValueError) as exc:  # a bad request (pydantic: a ValueError), Temporal unreachable: refused
        return Verdict(False, f"Vicar could not ask: {exc}", "", gate_id)
    try:
        result = await gate.result(timeout=wait)
    except TimeoutError:
        return Verdict(False, f"no answer yet: gate {gate_id} waits for the person", "", gate_id)
    allowed = result.action.value == "approve"
    return Verdict(allowed, result.text, result.answered_by.value, gate_id)


def gate_id_for(principal: str, scope: str, call_id: str, tool: str, artifact: str) -> str:
    """The gate of one call: the same call asked again gets the same gate; a reused call id
    with other arguments, or in another scope, another one."""
    seen = "\0".join((principal, scope, call_id, tool, artifact))
    return "agent-" + hashlib.sha256(seen.encode("utf-8", "surrogatepass")).hexdigest()[:32]
