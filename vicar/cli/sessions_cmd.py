"""`vicar session`: show a working session, end one."""

from __future__ import annotations

import asyncio

import typer

from vicar import contracts as c
from vicar.cli.base import console, friendly, open_client, session_app
from vicar.display import text
from vicar.errors import NotFound
from vicar.settings import Settings


@session_app.command("show")
@friendly
def session_show(principal: str = typer.Argument(...), session_id: str = typer.Argument(...)) -> None:
    """A session's gates, LLM cost and cache savings so far, and its consolidation."""
    asyncio.run(_session(principal, session_id, end=False))


@session_app.command("end")
@friendly
def session_end(principal: str = typer.Argument(...), session_id: str = typer.Argument(...)) -> None:
    """End a session now: consolidation starts (gates still waiting for a human keep their answer)."""
    asyncio.run(_session(principal, session_id, end=True))


async def _session(principal: str, session_id: str, end: bool) -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from vicar.models import check_principal
    from vicar.models.session import SessionSummary

    check_principal(principal)
    client = await open_client(Settings.from_env())
    handle = client.get_workflow_handle(c.session_workflow_id(principal, session_id))
    try:
        if end:
            await handle.signal(c.END_SIGNAL)
            console.print(text(f"session {session_id} of {principal} ends: consolidation starts"))
            return
        s = await handle.query(c.SUMMARY_QUERY, result_type=SessionSummary)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"no session {session_id!r} for principal {principal!r}") from None
        raise
    console.print(
        text(
            f"session {s.session_id} of {s.principal}: {s.status}"
            + (f" (ended by {s.ended_by})" if s.ended_by else "")
            + f"; working memory {s.working_memory_chunks} chunks, "
            + f"~{s.working_memory_tokens} tokens at N={s.n_at_start}"
        )
    )
    console.print(
        f"gates: {len(s.gates)} ({sum(g.done for g in s.gates)} done); LLM calls {s.usage.calls}, "
        f"cost ${s.usage.cost_usd:.4f}, cache saved ${s.usage.cache_savings_usd:.4f}"
    )
    if s.consolidation:
        r = s.consolidation
        console.print(
            text(
                f"consolidation: {', '.join(f'{k} {v}' for k, v in sorted(r.counts.items())) or 'nothing to do'}; "
                f"superseded {len(r.superseded)}, tensions {r.tensions}"
            )
        )
