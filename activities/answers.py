"""Judging a human answer when it comes: the principal's allow-list as it is now, and the
Temporal client identity the answer came with, read from the gate's own history (the
workflow cannot see it: an update handler gets its id, a signal handler nothing)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.errors import ANSWER_NOT_IN_HISTORY, VicarError
from vicar.responders import load_policy


async def caller_identity(client: Client, vet: c.AnswerVet) -> str | None:
    """The identity on the update's accepted event (matched by update id) or on the k-th
    human_response signal event. Raises (retryable) when the event is not there yet."""
    handle = client.get_workflow_handle(vet.workflow_id, run_id=vet.run_id)
    signals = 0
    async for event in handle.fetch_history_events():
        if vet.update_id is not None and event.HasField("workflow_execution_update_accepted_event_attributes"):
            meta = event.workflow_execution_update_accepted_event_attributes.accepted_request.meta
            if meta.update_id == vet.update_id:
                return meta.identity or None
        elif vet.signal_ordinal is not None and event.HasField("workflow_execution_signaled_event_attributes"):
            attrs = event.workflow_execution_signaled_event_attributes
            if attrs.signal_name == c.HUMAN_RESPONSE_SIGNAL:
                signals += 1
                if signals == vet.signal_ordinal:
                    return attrs.identity or None
    raise ApplicationError(f"the answer's event is not in {vet.workflow_id}'s history yet", type=ANSWER_NOT_IN_HISTORY)


def identity_refusal(responder: str, identity: str | None) -> str | None:
    """Why an answer is refused when identities must match (None: they match)."""
    if identity == responder:
        return None
    return (
        f"the answer's client identity {identity!r} is not its responder {responder!r} "
        f"(VICAR_REQUIRE_IDENTITY_MATCH: connect with identity {responder!r})"
    )


async def vet(client: Client, principals_dir: Path, require_match: bool, vet: c.AnswerVet) -> c.AnswerVerdict:
    try:
        policy = await asyncio.to_thread(load_policy, principals_dir, vet.principal)
    except VicarError as exc:
        # Fail closed: a list that cannot be read lets nobody answer until it is fixed.
        return c.AnswerVerdict(
            allowed=False, why=f"nobody may answer for {vet.principal} until their allow-list is fixed: {exc}"
        )
    identity = await caller_identity(client, vet)
    why = policy.refusal(vet.principal, vet.responder)
    if why is None and require_match:
        why = identity_refusal(vet.responder, identity)
    return c.AnswerVerdict(allowed=why is None, why=why or "", identity=identity)
