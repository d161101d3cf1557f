"""The session's contract (workflows/session.py): a principal's working session, which
its gates join and leave, and which ends in a consolidation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.common import RetryPolicy

from vicar.contracts.handles import Handles
from vicar.models.session import SessionJoin

SESSION_WORKFLOW = "VicarSession"
JOIN_UPDATE = "join"
GATE_DONE_SIGNAL = "gate_done"
END_SIGNAL = "end"
SUMMARY_QUERY = "summary"

SESSION_HANDLES = Handles(
    SESSION_WORKFLOW,
    signals=(GATE_DONE_SIGNAL, END_SIGNAL),
    updates=(JOIN_UPDATE,),
    queries=(SUMMARY_QUERY,),
)


def session_workflow_id(principal: str, session_id: str) -> str:
    return f"vicar-session/{principal}/{session_id}"


# Activities: a gate joins its session (JoinInput -> JoinReply); the session loads its
# working memory once (WorkingMemoryInput -> WorkingMemoryView).
JOIN_SESSION = "join_session"
LOAD_WORKING_MEMORY = "load_working_memory"
SESSION_ACTIVITIES = (JOIN_SESSION, LOAD_WORKING_MEMORY)

# Loading the working memory waits for the memory however long (a broken one fails at
# once, non-retryable, and the session opens without it).
LOAD_OPTIONS: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10)),
)


class JoinInput(BaseModel):
    principal: str
    session_id: str
    join: SessionJoin


class WorkingMemoryInput(BaseModel):
    principal: str
    token_budget: int
