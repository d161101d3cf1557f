"""`vicar team`: which team a principal belongs to (an operator's choice, opt-in). What
crosses between a team's principals is only their answers' counts per kind of action and the
autonomy rule's draws (vicar.proxy.team_store); docs/team-prior.md."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from vicar.cli.base import OUTPUT, Output, app, console, friendly
from vicar.settings import Settings

team_app = typer.Typer(no_args_is_help=True, help="Teams: principals whose answers' counts serve each other.")
app.add_typer(team_app, name="team")


@team_app.command("set")
@friendly
def team_set(
    principal: str = typer.Argument(...),
    team: Optional[str] = typer.Argument(None, help="The team (none: out of every team)."),
) -> None:
    """Put PRINCIPAL in TEAM (out of any other); without TEAM, in none. From their next gate
    on, their proxy reads the team's answers per kind of action, and their answers count for
    the team."""
    from vicar.proxy.team_store import check_team, set_team

    settings = Settings.from_env()
    before = set_team(settings.data_dir, principal, check_team(team) if team else None)
    now = f"in team {team}" if team else "in no team"
    was = f" (was in team {before})" if before and before != team else ""
    console.print(f"{principal} is {now}{was}", markup=False, highlight=False)


@team_app.command("list")
@friendly
def team_list(team: Optional[str] = typer.Argument(None), output: Output = OUTPUT) -> None:
    """Every team and its members (or TEAM's)."""
    from vicar.proxy.team_store import check_team, members, teams_dir

    settings = Settings.from_env()
    base = teams_dir(settings.data_dir)
    if team:
        names = [check_team(team)]
    else:
        names = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    teams = {name: members(settings.data_dir, name) for name in names}
    if output is Output.json:
        sys.stdout.write(json.dumps(teams, indent=2) + "\n")
        return
    if not teams:
        console.print("no team", markup=False, highlight=False)
    for name, who in teams.items():
        console.print(f"{name}: {', '.join(who) or 'no member'}", markup=False, highlight=False)
