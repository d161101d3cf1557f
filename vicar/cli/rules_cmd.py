"""`vicar rules`: the rules a principal writes above the learned proxy (docs/rules.md),
kept in the principal's brain, so any machine that reaches Temporal reads and changes
them. `vicar principal pause|resume` (the off switch) share the sending and printing."""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from typing import Optional

import typer

from vicar.cli.base import OUTPUT, Output, app, console, friendly, open_client
from vicar.errors import InvalidInput
from vicar.models import CfAState, RequestKind, check_principal
from vicar.models.control import Control, Effect, Rule, check_responder
from vicar.settings import Settings

rules_app = typer.Typer(no_args_is_help=True, help="Rules a principal writes: what the proxy may never decide alone.")
app.add_typer(rules_app, name="rules")


def _who(by: str | None) -> str:
    try:
        return check_responder(by) if by else getpass.getuser()
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def send_change(principal: str, change: dict, output: Output) -> None:
    """One change to the principal's brain, then the rules and pauses in force."""
    from vicar.client import change_control
    from vicar.models.brain import BrainConfig

    check_principal(principal)  # before any connection: a bad name is one line, exit 2
    settings = Settings.from_env()

    async def go() -> Control:
        client = await open_client(settings)
        # Started here if no gate has started it: with the deployment's sharding, as a worker would.
        config = BrainConfig(shard_count=settings.shard_count, shard_wait_seconds=settings.shard_wait_seconds)
        return await change_control(client, principal, change, task_queue=settings.task_queue, config=config)

    print_control(principal, asyncio.run(go()), output)


def print_control(principal: str, control: Control, output: Output) -> None:
    if output is Output.json:
        sys.stdout.write(control.model_dump_json(indent=2) + "\n")
        return
    for p in control.pauses:
        console.print(f"{principal} is PAUSED for {p.scope()}: {p.reason()}", markup=False, highlight=False)
    if not control.rules:
        console.print(f"{principal} has no rules", markup=False, highlight=False)
    for r in control.rules:
        effect = f"target {r.target:g}" if r.target is not None else r.effect.value
        console.print(f"{r.name}: {effect} when {describe(r)} (by {r.author or '?'})", markup=False, highlight=False)


def describe(r: Rule) -> str:
    parts = [
        ("state", [s.value for s in r.states]),
        ("task type", r.task_types),
        ("agent", r.upstream_agents),
        ("lineage", r.lineages),
        ("path", r.paths),
        (f"words in the {r.text_in}", [json.dumps(w) for w in r.words]),
        (f"regex in the {r.text_in}", [json.dumps(r.regex)] if r.regex else []),
    ]
    return " and ".join(f"{what} is {' or '.join(vals)}" for what, vals in parts if vals)


@rules_app.command("add")
@friendly
def rules_add(
    principal: str = typer.Argument(...),
    name: str = typer.Argument(..., help="The rule's name, shown as the reason a gate asks."),
    effect: Effect = typer.Option(
        ...,
        "--effect",
        help="ask: always the human; approve/reject: answer so; target: the proxy answers alone only where "
        "its error on these gates is proven within --target.",
    ),
    state: list[CfAState] = typer.Option([], "--state", help="Match gates in this state (repeatable)."),
    task_type: list[str] = typer.Option([], "--task-type", help="Match this task type (repeatable)."),
    agent: list[str] = typer.Option([], "--agent", help="Match this upstream agent (repeatable)."),
    lineage: list[str] = typer.Option([], "--lineage", help="Match this artifact lineage (repeatable)."),
    path: list[str] = typer.Option([], "--path", help="Match an artifact path by this glob (repeatable)."),
    word: list[str] = typer.Option([], "--word", help="Match this word or phrase, whole words, any case (repeatable)."),
    regex: Optional[str] = typer.Option(None, "--regex", help="Match this RE2 regular expression (linear-time)."),
    text_in: str = typer.Option("both", "--in", help="Where words and the regex look: artifact, question or both."),
    text: str = typer.Option("", "--text", help="The words an approve/reject rule answers with."),
    target: Optional[float] = typer.Option(
        None, "--target", help="A target rule's error target for the gates it matches, e.g. 0.01 (--effect target)."
    ),
    by: Optional[str] = typer.Option(None, "--by", help="Who writes the rule (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """Add a rule: every condition given must hold (any of a repeated one). It holds from
    PRINCIPAL's next gate on, on every worker."""
    who = _who(by)
    rule = Rule.model_validate(
        dict(
            name=name,
            effect=effect,
            author=who,
            states=state,
            task_types=task_type,
            upstream_agents=agent,
            lineages=lineage,
            paths=path,
            words=word,
            regex=regex,
            text_in=text_in,  # validated by the model: one line if not one of the three
            text=text,
            target=target,
        )
    )
    send_change(principal, dict(op="add_rule", by=who, rule=rule.model_dump(mode="json")), output)


@rules_app.command("remove")
@friendly
def rules_remove(
    principal: str = typer.Argument(...),
    name: str = typer.Argument(...),
    by: Optional[str] = typer.Option(None, "--by", help="Who removes it (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """Remove PRINCIPAL's rule NAME (removing one already gone changes nothing)."""
    send_change(principal, dict(op="remove_rule", by=_who(by), name=name), output)


def _read(principal: str) -> Control:
    from vicar.client import get_control

    check_principal(principal)
    settings = Settings.from_env()

    async def go() -> Control:
        return await get_control(await open_client(settings), principal)

    return asyncio.run(go())


@rules_app.command("list")
@friendly
def rules_list(principal: str = typer.Argument(...), output: Output = OUTPUT) -> None:
    """PRINCIPAL's rules, in the order they apply, and any pause."""
    print_control(principal, _read(principal), output)


@rules_app.command("test")
@friendly
def rules_test(
    principal: str = typer.Argument(...),
    state: CfAState = typer.Option(CfAState.PLAN_ASSERT, "--state"),
    task_type: str = typer.Option(..., "--task-type"),
    question: str = typer.Option("Approve?", "--question"),
    artifact: str = typer.Option("", "--artifact", help="The artifact's text."),
    artifact_path: list[str] = typer.Option([], "--artifact-path", help="A path the gate names (globs only)."),
    agent: Optional[str] = typer.Option(None, "--agent"),
    lineage: Optional[str] = typer.Option(None, "--lineage"),
    kind: RequestKind = typer.Option(RequestKind.gate, "--kind"),
    output: Output = OUTPUT,
) -> None:
    """Which rule (or pause) a gate like this would hit, from the rules in force. Files
    are not read here: words and the regex look at --artifact and --question."""
    from vicar.models import GateRequest
    from vicar.proxy.lineage import lineage_of
    from vicar.proxy.rules import verdict

    req = GateRequest(
        principal=principal,
        gate_id="rules-test",
        state=state,
        task_type=task_type,
        question=question,
        artifact_text=artifact,
        artifact_paths=artifact_path,
        upstream_agent=agent,
        lineage=lineage,
        kind=kind,
    )
    v = verdict(_read(principal), req, artifact, lineage_of(req, artifact).lineage)
    if output is Output.json:
        sys.stdout.write((v.model_dump_json(indent=2) if v else "null") + "\n")
    elif v is None:
        from vicar.proxy.autonomy.targets import matches_request, target_rules

        tight = [r for r in target_rules(_read(principal)) if matches_request(r, req)]
        said = "; ".join(f"target rule {r.name}: within {r.target:g} as well" for r in tight)
        console.print(
            "no rule or pause applies: the proxy decides as usual" + (f" ({said})" if said else ""),
            markup=False,
            highlight=False,
        )
    elif v.escalate:
        console.print(f"asks the human: {v.reason}", markup=False, highlight=False)
    else:
        assert v.rule is not None
        console.print(f"answered {v.rule.effect.value} by {v.reason}", markup=False, highlight=False)
