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
from vicar.models.control import DEFAULT_RULES, Control, Effect, Rule, check_responder, describe
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
    for r in DEFAULT_RULES:
        if r.name in control.removed_defaults:
            line = f"{r.name}: removed (default; it asked when it {r.why}; vicar rules restore {principal} {r.name})"
        else:
            line = f"{r.name}: ask when it {r.why} (default; vicar rules remove {principal} {r.name} to drop it)"
        console.print(line, markup=False, highlight=False)
    if not control.rules:
        console.print(f"{principal} has no rules of their own", markup=False, highlight=False)
    for r in control.rules:
        effect = f"target {r.target:g}" if r.target is not None else r.effect.value
        console.print(f"{r.name}: {effect} when {describe(r)} (by {r.author or '?'})", markup=False, highlight=False)


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
    """Remove PRINCIPAL's rule NAME, one of Vicar's default rules included (removing one
    already gone changes nothing)."""
    send_change(principal, dict(op="remove_rule", by=_who(by), name=name), output)


@rules_app.command("restore")
@friendly
def rules_restore(
    principal: str = typer.Argument(...),
    name: str = typer.Argument(..., help="A default rule's name (`vicar rules list` shows them)."),
    by: Optional[str] = typer.Option(None, "--by", help="Who restores it (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """Bring back one of Vicar's default rules that PRINCIPAL removed."""
    send_change(principal, dict(op="restore_rule", by=_who(by), name=name), output)


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


@rules_app.command("suggest")
@friendly
def rules_suggest(
    principal: str = typer.Argument(...),
    accept: Optional[str] = typer.Option(None, "--accept", help="Make the suggested rule NAME PRINCIPAL's own."),
    by: Optional[str] = typer.Option(None, "--by", help="Who accepts it (default: the OS user)."),
    output: Output = OUTPUT,
) -> None:
    """The rules PRINCIPAL's habits suggest (a run of identical answers on one kind of
    action, none contrary); --accept NAME adds one as their own rule. Nothing is applied
    without it."""
    from vicar.cli.memory_cmd import open_store
    from vicar.models import OutcomeRecord
    from vicar.proxy.control_store import kept_control
    from vicar.proxy.habits import suggestions

    with open_store(principal) as store:
        records = [OutcomeRecord.model_validate_json(r) for _, r in store.outcomes(answered_by="human")]
        offered = suggestions(records, kept_control(store))
    if accept is not None:
        chosen = next((s for s in offered if s.rule.name == accept), None)
        if chosen is None:
            names = ", ".join(s.rule.name for s in offered) or "none now"
            raise InvalidInput(f"no suggestion named {accept!r} for {principal} (suggested: {names})")
        who = _who(by)
        rule = chosen.rule.model_copy(update={"author": who})
        send_change(principal, dict(op="add_rule", by=who, rule=rule.model_dump(mode="json")), output)
        return
    if output is Output.json:
        sys.stdout.write(json.dumps([s.model_dump(mode="json") for s in offered], indent=2) + "\n")
        return
    if not offered:
        console.print(f"{principal}'s answers suggest no rule yet", markup=False, highlight=False)
    for s in offered:
        console.print(
            f"{s.rule.name}: {s.words} (vicar rules suggest {principal} --accept {s.rule.name})",
            markup=False,
            highlight=False,
        )


def _call_request(principal: str, command: str | None, hook_input: str | None, agent: str | None):
    """The gate a coding agent's call would open: a command line as its shell call, or a
    hook input (a file, `-` for stdin), read and checked as the hook reads it."""
    import os

    from vicar.hooks import protocol as p
    from vicar.hooks.tool_call import gate_request

    who = agent or p.CLAUDE_CODE
    if who not in p.AGENTS:
        raise InvalidInput(f"with --command or --hook-input, --agent is {' or '.join(p.AGENTS)}, not {who!r}")
    if command is not None:
        call = {
            "hook_event_name": p.PRE_TOOL_USE,
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "session_id": "rules-test",
            "tool_use_id": "rules-test",
            "cwd": os.getcwd(),
        }
    else:
        assert hook_input is not None
        try:
            raw = sys.stdin.buffer.read(p.MAX_INPUT_BYTES + 1) if hook_input == "-" else _read_bounded(hook_input)
            call = p.parse(raw)
        except p.BadInput as exc:
            raise InvalidInput(f"--hook-input: {exc}") from None
        if call["hook_event_name"] == p.POST_TOOL_USE:
            raise InvalidInput("--hook-input: a PostToolUse opens no gate (it answers nothing)")
    return gate_request(call, Settings.from_env(), principal, who)


def _read_bounded(path: str) -> bytes:
    from vicar.hooks import protocol as p

    try:
        with open(path, "rb") as f:
            return f.read(p.MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"--hook-input: cannot read {path}: {exc.strerror or exc}") from None


@rules_app.command("test")
@friendly
def rules_test(
    principal: str = typer.Argument(...),
    state: CfAState = typer.Option(CfAState.PLAN_ASSERT, "--state"),
    task_type: Optional[str] = typer.Option(None, "--task-type"),
    question: str = typer.Option("Approve?", "--question"),
    artifact: str = typer.Option("", "--artifact", help="The artifact's text."),
    artifact_path: list[str] = typer.Option([], "--artifact-path", help="A path the gate names (globs only)."),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="The upstream agent; with --command or --hook-input: claude-code (default) or codex."
    ),
    lineage: Optional[str] = typer.Option(None, "--lineage"),
    kind: RequestKind = typer.Option(RequestKind.gate, "--kind"),
    command: Optional[str] = typer.Option(
        None, "--command", help="A shell command line, as a coding agent's Bash call (its gate as the hook opens it)."
    ),
    hook_input: Optional[str] = typer.Option(
        None, "--hook-input", help="A coding agent's hook input (JSON file, - for stdin), as the hook reads it."
    ),
    output: Output = OUTPUT,
) -> None:
    """Which rule (or pause) a gate like this would hit, from the rules in force. Files
    are not read here: words and the regex look at --artifact and --question. With
    --command or --hook-input, the gate is the one a coding agent's call opens (its task
    type, lineage, question and artifact as the hook makes them)."""
    from vicar.models import GateRequest
    from vicar.proxy.lineage import lineage_of
    from vicar.proxy.rules import verdict

    if command is not None and hook_input is not None:
        raise InvalidInput("give --command or --hook-input, not both")
    if command is not None or hook_input is not None:
        req = _call_request(principal, command, hook_input, agent)
        artifact = req.artifact_text
        if output is not Output.json:
            console.print(
                f"the gate: task type {req.task_type}, lineage {req.lineage or '(none)'}, agent {req.upstream_agent}",
                markup=False,
                highlight=False,
            )
    else:
        if task_type is None:
            raise InvalidInput("give --task-type (or --command, or --hook-input)")
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
