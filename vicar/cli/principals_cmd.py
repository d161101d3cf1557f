"""`vicar principal`: who may answer for a principal, the off switch (pause, resume), and
moving its memory between shards."""

from __future__ import annotations

import asyncio

import typer

from vicar import contracts as c
from vicar.cli.base import OUTPUT, Output, console, friendly, open_client, principal_app
from vicar.errors import InvalidInput, VicarError
from vicar.models import CfAState
from vicar.settings import Settings


@principal_app.command("allow")
@friendly
def principal_allow(
    principal: str = typer.Argument(...),
    names: list[str] = typer.Argument(None),
    anyone: bool = typer.Option(
        False,
        "--anyone",
        help="Open PRINCIPAL to every name: any client's answer, every inbox account, every reviewer (logged).",
    ),
    by: str = typer.Option(None, "--by", help="Who makes the change (default: the OS user)."),
) -> None:
    """Let these responders answer for PRINCIPAL (logged in responders.log with who and when)."""
    from vicar.responders import change_allowed

    if bool(names) == anyone:
        raise VicarError("give the names to allow, or --anyone (not both)")
    _print_policy(
        principal,
        change_allowed(Settings.from_env().principals_dir, principal, "anyone" if anyone else "allow", names or [], by),
    )


@principal_app.command("disallow")
@friendly
def principal_disallow(
    principal: str = typer.Argument(...),
    names: list[str] = typer.Argument(...),
    by: str = typer.Option(None, "--by", help="Who makes the change (default: the OS user)."),
) -> None:
    """Take these responders off PRINCIPAL's list (an emptied list lets nobody answer)."""
    from vicar.responders import change_allowed

    _print_policy(principal, change_allowed(Settings.from_env().principals_dir, principal, "disallow", names, by))


@principal_app.command("allowed")
@friendly
def principal_allowed(principal: str = typer.Argument(...)) -> None:
    """Who may answer for PRINCIPAL."""
    from vicar.responders import load_policy

    _print_policy(principal, load_policy(Settings.from_env().principals_dir, principal))


@principal_app.command("pause")
@friendly
def principal_pause(
    principal: str = typer.Argument(...),
    state: CfAState = typer.Option(None, "--state", help="Only gates in this state."),
    task_type: str = typer.Option(None, "--task-type", help="Only gates of this task type."),
    by: str = typer.Option(None, "--by", help="Who pauses (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """The off switch: from PRINCIPAL's next gate on, the proxy answers none (rules
    neither), whatever the gate's escalation mode; `never` gates wait for the human.
    Each escalation says "paused by X at T". Works from any machine reaching Temporal."""
    from vicar.cli.rules_cmd import _who, send_change

    send_change(principal, dict(op="pause", by=_who(by), state=state, task_type=task_type), output)


@principal_app.command("resume")
@friendly
def principal_resume(
    principal: str = typer.Argument(...),
    state: CfAState = typer.Option(None, "--state", help="Lift only the pause of this state (with --task-type)."),
    task_type: str = typer.Option(None, "--task-type", help="Lift only the pause of this task type."),
    by: str = typer.Option(None, "--by", help="Who resumes (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """Lift PRINCIPAL's pause of exactly this scope; with none given, every pause."""
    from vicar.cli.rules_cmd import _who, send_change

    send_change(principal, dict(op="resume", by=_who(by), state=state, task_type=task_type), output)


@principal_app.command("move")
@friendly
def principal_move(
    principal: str = typer.Argument(...),
    to_shard: int = typer.Option(..., "--to-shard", min=0, help="The shard whose owner will hold the memory."),
) -> None:
    """Move PRINCIPAL's memory to another shard, under its brain's turn (its gates wait
    meanwhile). Resumable: run again, it attaches to the move under way."""
    from vicar.models import check_principal

    settings = Settings.from_env()
    check_principal(principal)
    if settings.shard_count is None:
        raise InvalidInput("moving a memory needs VICAR_SHARD_COUNT (the deployment's shard count)")
    if to_shard >= settings.shard_count:
        raise InvalidInput(f"shard {to_shard} does not exist (VICAR_SHARD_COUNT is {settings.shard_count})")
    asyncio.run(_move(settings, principal, to_shard))


async def _move(settings: Settings, principal: str, to_shard: int) -> None:
    from temporalio.common import WorkflowIDConflictPolicy

    client = await open_client(settings)
    handle = await client.start_workflow(
        c.MOVE_WORKFLOW,
        c.MoveInput(principal=principal, to_shard=to_shard),
        id=c.move_workflow_id(principal),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        result_type=c.MoveReport,
    )
    with console.status(f"Moving {principal}'s memory to shard {to_shard} (workflow {handle.id}) …"):
        report = await handle.result()
    if not report.moved:
        console.print(f"{principal}'s memory is on shard {report.from_shard} already", markup=False)
    else:
        console.print(
            f"moved {principal}'s memory from shard {report.from_shard} to shard {report.to_shard}: "
            f"{report.outcomes} outcomes, {report.archive_bytes} bytes archived; the old copy is removed",
            markup=False,
        )


def _print_policy(principal: str, policy) -> None:
    from vicar.responders import has_no_list

    if policy.responders:
        said = f"may answer for {principal}: {', '.join(policy.responders)}"
    elif has_no_list(policy):
        said = (
            f"{principal} has no allow-list: only {principal} itself answers for it, at its gates, in the "
            f"inbox and in reviews (let others in by name, or everyone with --anyone)"
        )
    elif policy.anyone:
        said = f"anyone may answer for {principal}, in the inbox and in reviews too (opened with --anyone)"
    else:
        said = f"nobody may answer for {principal} (the list was emptied; reopen with --anyone or a name)"
    console.print(said, markup=False, highlight=False)
