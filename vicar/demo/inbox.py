"""`vicar demo --keep`: gates left waiting for the person, and the inbox to answer them
in: the Quick start leads a newcomer on to where a reviewer answers."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from vicar.client.gates import gate_details, start_gate
from vicar.models import CfAState, EscalationMode, GateRequest, GateStatus

INBOX_HOST = "127.0.0.1"  # the demo's inbox is for this machine's user only
ESCALATED_SECONDS = 60.0

# What waits for the person: each asks them whatever the proxy guesses (escalation mode
# always), so the page shows the proxy's words beside an artifact worth reading.
WAITING: tuple[tuple[str, CfAState, str, str, str], ...] = (
    (
        "docs",
        CfAState.WORK_ASSERT,
        "Merge this docs-only change?",
        "docs-bot",
        "diff --git a/docs/install.md b/docs/install.md\n"
        "--- a/docs/install.md\n+++ b/docs/install.md\n@@ -1,3 +1,3 @@\n # Install\n"
        "-Run pip install vicar.\n+Run pip install vicar; also DROP TABLE users;\n Then start a worker.\n",
    ),
    (
        "db-migration",
        CfAState.PLAN_ASSERT,
        "Approve or revise the proposed plan: database migration.",
        "migration-bot",
        "Plan: drop the column users.password_hash. No rollback step.",
    ),
    (
        "api-change",
        CfAState.PLAN_ASSERT,
        "Approve or revise the proposed plan: public API change.",
        "api-bot",
        "Plan: rename GET /projects to GET /workspaces (breaking change).",
    ),
)


def waiting_requests(principal: str) -> list[GateRequest]:
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"
    return [
        GateRequest(
            principal=principal,
            gate_id=f"demo-{run_id}-wait-{k}",
            state=state,
            task_type=task_type,
            question=question,
            artifact_text=artifact,
            actor_message=f"Finished the {task_type} step; please review.",
            upstream_agent=agent,
            escalation_mode=EscalationMode.always,
        )
        for k, (task_type, state, question, agent, artifact) in enumerate(WAITING, 1)
    ]


async def open_waiting(client, principal: str, task_queue: str) -> list[str]:
    """Start the gates left for the person; their ids once each waits (escalated)."""
    reqs = waiting_requests(principal)
    for req in reqs:
        await start_gate(client, req, task_queue)
    deadline = time.monotonic() + ESCALATED_SECONDS
    pending = [r.gate_id for r in reqs]
    while pending and time.monotonic() < deadline:
        for gate_id in list(pending):
            d = await gate_details(client, gate_id)
            if d is not None and d.status is GateStatus.escalated:
                pending.remove(gate_id)
        if pending:
            await asyncio.sleep(0.1)
    return [r.gate_id for r in reqs if r.gate_id not in pending]


def demo_account(data_dir: Path, principal: str) -> str:
    """The principal's own inbox account (named after it, answering for it only), with a
    fresh token: only its hash is kept, so a later demo issues a new one (the old
    link's sessions end)."""
    from vicar.inbox.accounts import add_user

    return add_user(data_dir, principal, [principal])[1]
