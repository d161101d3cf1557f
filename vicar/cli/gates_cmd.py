"""Gates from the command line: open one, read its result, ask mid-turn, the contract
for other languages, the escalations waiting for a human and the human's answer."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Optional

import typer

from vicar.cli.base import OUTPUT, Output, app, console, err, friendly, gate_app, open_client
from vicar.display import text
from vicar.errors import InvalidInput
from vicar.models import CfAState, EscalationMode, GateRequest, HumanAnswer
from vicar.settings import ANSWER_TIMEOUT, Settings

MAX_GATE_FILE_BYTES = 2_000_000  # a GateRequest's texts total ~225k characters; JSON escapes need up to 6 bytes each


@gate_app.command("start")
@friendly
def gate_start(
    file: Optional[Path] = typer.Argument(None, help="GateRequest as JSON ('-' for stdin)."),
    principal: Optional[str] = typer.Option(None, help="The human the proxy stands in for."),
    gate_id: Optional[str] = typer.Option(
        None, "--gate-id", help="Unique id of this gate (the workflow id derives from it)."
    ),
    state: Optional[CfAState] = typer.Option(None, help="What is being approved: the intent, the plan or the work."),
    task_type: Optional[str] = typer.Option(None, "--task-type", help="The kind of task, e.g. db-migration."),
    question: Optional[str] = typer.Option(None, help="The question the human would be asked."),
    artifact: Optional[str] = typer.Option(None, help="Artifact text: the plan, the diff, the deliverable."),
    artifact_path: list[str] = typer.Option(
        [], "--artifact-path", help="A file to read as the artifact (under VICAR_ARTIFACT_ROOTS); repeatable."
    ),
    actor_message: Optional[str] = typer.Option(None, "--actor-message", help="What the agent says with it."),
    escalation_mode: Optional[EscalationMode] = typer.Option(
        None,
        "--escalation-mode",
        help="when_unsure (default): the proxy answers only when it has earned it; "
        "always: the human; never: the proxy.",
    ),
    upstream_agent: Optional[str] = typer.Option(
        None, "--upstream-agent", help="The agent that produced the artifact."
    ),
    session_id: Optional[str] = typer.Option(None, "--session-id", help="Join this working session."),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="Wait for the gate's result, print it as JSON and exit with "
        "its outcome: 0 approve, 10 correct, 11 reject, 12 hold, "
        "13 withdraw, 14 timed out.",
    ),
    output: Output = OUTPUT,
) -> None:
    """Open a gate from a JSON file and/or flags (flags override the file). Sending the
    same request again attaches to the existing gate; another request under its id is
    refused (exit 5)."""
    data: dict = {}
    if file is not None:
        data = _read_gate_file(file)
    flags = dict(
        principal=principal,
        gate_id=gate_id,
        state=state,
        task_type=task_type,
        question=question,
        artifact_text=artifact,
        actor_message=actor_message,
        escalation_mode=escalation_mode,
        upstream_agent=upstream_agent,
        artifact_paths=artifact_path or None,
        session_id=session_id,
    )
    data.update({k: v for k, v in flags.items() if v is not None})
    req = GateRequest.model_validate(data)  # refused here, before any workflow starts
    settings = Settings.from_env()
    _check_request(settings, req)
    asyncio.run(_gate_start(settings, req, wait, output))


def _check_request(settings: Settings, req: GateRequest) -> None:
    """What the models cannot know: the configured text limits and artifact roots."""
    import os

    from vicar.artifacts import confine

    settings.check_texts(question=req.question, actor_message=req.actor_message, artifact_text=req.artifact_text)
    for p in req.artifact_paths:
        confine(p, settings.artifact_roots)
    # The worker reads the paths: relative ones must not depend on its directory.
    req.artifact_paths = [os.path.abspath(p) for p in req.artifact_paths]


def _read_gate_file(file: Path) -> dict:
    try:
        if str(file) == "-":
            raw = sys.stdin.buffer.read(MAX_GATE_FILE_BYTES + 1)
        else:
            with file.open("rb") as f:
                raw = f.read(MAX_GATE_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {file}: {exc.strerror or exc}") from None
    if len(raw) > MAX_GATE_FILE_BYTES:
        raise InvalidInput(f"{file} is larger than {MAX_GATE_FILE_BYTES:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file} is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{file} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{file} is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{file} must hold a JSON object")
    return data


async def _gate_start(settings: Settings, req: GateRequest, wait: bool, output: Output) -> None:
    from vicar.client.gates import start_gate
    from vicar.errors import OUTCOME_EXIT, TIMED_OUT_EXIT

    client = await open_client(settings)
    handle = await start_gate(client, req, settings.task_queue)
    # Progress goes to stderr: stdout holds only what a script reads.
    err.print(text(f"gate {req.gate_id} started (workflow {handle.id})"))
    if wait:
        result = await handle.result()
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        raise typer.Exit(TIMED_OUT_EXIT if result.timed_out else OUTCOME_EXIT.get(result.action.value, 0))
    if output is Output.json:
        sys.stdout.write(json.dumps({"gate_id": req.gate_id, "workflow_id": handle.id}) + "\n")


@gate_app.command("result")
@friendly
def gate_result(
    gate_id: str = typer.Argument(..., help="The gate id, or the workflow id the gate was started under."),
    timeout: float = typer.Option(
        0.0, min=0.0, help="Seconds to wait for a gate that has no result yet (0: do not wait)."
    ),
) -> None:
    """Print an earlier gate's result as JSON. Exit 8 if it has none yet, 5 if it ended
    without one (failed, cancelled, terminated), 3 if there is no such gate."""
    asyncio.run(_gate_result(Settings.from_env(), gate_id, timeout))


async def _gate_result(settings: Settings, gate_id: str, timeout: float) -> None:
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from vicar.client import GateHandle
    from vicar.client.gates import find_gate
    from vicar.errors import Conflict, Pending

    client = await open_client(settings)
    handle, description = await find_gate(client, gate_id)  # one describe: the handle's and the status
    gate = GateHandle(gate_id=gate_id, workflow_id=handle.id, client=client)
    running = description.status == WorkflowExecutionStatus.RUNNING
    try:
        if running and not timeout:
            raise TimeoutError
        result = await gate.result(timeout=timeout if running else None)
    except TimeoutError:
        details = await gate.details()
        raise Pending(
            f"gate {gate_id!r} has no result yet (status: {details.status.value if details else 'starting'})"
        ) from None
    except WorkflowFailureError as exc:
        status = (await client.get_workflow_handle(gate.workflow_id).describe()).status
        cause = getattr(exc.cause, "message", None) or str(exc.cause or exc)
        raise Conflict(f"gate {gate_id!r} ended without a result ({status.name.lower()}): {cause}") from None
    sys.stdout.write(result.model_dump_json(indent=2) + "\n")


@gate_app.command("show")
@friendly
def gate_show(
    gate_id: str = typer.Argument(..., help="The gate id, or the workflow id the gate was started under."),
    output: Output = OUTPUT,
) -> None:
    """Everything about one gate, waiting or finished: the question, the artifact (the
    text and excerpts of its files), the actor's message and agent, the deadline, the
    proxy's guess and words, why it escalated, the person's own past words it drew on, the
    dialog, and the result. Exit 3 if there is no such gate."""
    asyncio.run(_gate_show(Settings.from_env(), gate_id, output))


async def _gate_show(settings: Settings, gate_id: str, output: Output) -> None:
    from vicar.cli.gate_render import gate_page
    from vicar.client.view import gate_view

    view = await gate_view(await open_client(settings), gate_id)
    if output is Output.json:
        sys.stdout.write(view.model_dump_json(indent=2) + "\n")
        return
    console.print(gate_page(view))


@app.command()
@friendly
def ask(
    principal: str = typer.Argument(..., help="The human the question is for."),
    question: str = typer.Argument(..., help="The agent's question."),
    state: CfAState = typer.Option(..., help="The workflow state the asking agent is in."),
    task_type: str = typer.Option(..., "--task-type"),
    context: str = typer.Option("", help="What the agent was doing when it asked (its own words)."),
    question_id: Optional[str] = typer.Option(None, "--id", help="Unique id (default: generated)."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the answer (the human's, if escalated)."),
) -> None:
    """An agent's question mid-turn (AskQuestion): the proxy answers as the human would,
    or the question goes to the human; prints the answer."""
    import uuid

    req = GateRequest(
        kind="question",
        principal=principal,
        gate_id=question_id or f"q-{uuid.uuid4().hex[:12]}",
        state=state,
        task_type=task_type,
        question=question,
        actor_message=context,
    )
    settings = Settings.from_env()
    _check_request(settings, req)
    asyncio.run(_ask(settings, req, wait))


async def _ask(settings: Settings, req: GateRequest, wait: bool) -> None:
    from vicar.client.gates import gate_details, start_gate

    client = await open_client(settings)
    handle = await start_gate(client, req, settings.task_queue)
    if not wait:
        console.print(text(f"question {req.gate_id} asked (workflow {handle.id})"))
        return
    task = asyncio.ensure_future(handle.result())
    told = False
    while not task.done():
        await asyncio.wait({task}, timeout=1.0)
        d = None if task.done() else await gate_details(client, req.gate_id)
        if d is not None and d.status.value == "escalated" and not told:
            err.print(
                text(f'question {req.gate_id} is waiting for {req.principal}: vicar answer {req.gate_id} answer "..."')
            )
            told = True
    result = task.result()
    console.print(text(f"answered by the {result.answered_by.value}: {result.text}"))


@app.command()
@friendly
def schema(
    out: Optional[Path] = typer.Option(
        None,
        help="Write interface.json and one NAME.json per payload into this directory, "
        "instead of printing one JSON document.",
    ),
) -> None:
    """The gate's contract for clients in other languages: the workflow's interface
    (type, id, task queue, updates, signals, queries) and JSON Schema for every payload."""
    from vicar.client.schema import document

    doc = document()
    if out is None:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "interface.json").write_text(json.dumps(doc["interface"], indent=2) + "\n")
    for name, schema_ in doc["schemas"].items():
        (out / f"{name}.json").write_text(json.dumps(schema_, indent=2) + "\n")
    console.print(text(f"wrote interface.json and {len(doc['schemas'])} schemas to {out}"))


@app.command()
@friendly
def escalations(
    principal: Optional[str] = typer.Option(None, help="Only this principal's gates."),
    output: Output = OUTPUT,
) -> None:
    """List the gates waiting for a human, oldest first, with how long each has waited
    and its deadline, the question, the artifact's first line and its agent, and the
    proxy's guess. Reads Temporal's visibility: no worker needed."""
    asyncio.run(_escalations(principal, output))


async def _escalations(principal: str | None, output: Output) -> None:
    from vicar.client.gates import UNREADABLE, list_escalations

    client = await open_client(Settings.from_env())
    waiting = await list_escalations(client, principal)
    now = datetime.now(UTC)
    unreadable = [d for d in waiting if d.question.startswith(UNREADABLE)]
    if unreadable:
        # Listed anyway (one unreadable gate must not hide the others): why, once, on stderr,
        # where a script reading stdout does not trip on it.
        why = unreadable[0].question.removeprefix(UNREADABLE).removesuffix(")")
        err.print(
            text(
                f"warning: {len(unreadable)} of {len(waiting)} waiting gates listed without their summary: {why}",
                one_line=True,
            )
        )
    if output is Output.json:
        rows = [
            {
                **d.model_dump(mode="json"),
                "waited_seconds": round((now - d.escalated_at).total_seconds(), 1) if d.escalated_at else None,
            }
            for d in waiting
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not waiting:
        console.print("No gate is waiting for a human.")
        return
    from vicar.cli.gate_render import escalations_table

    console.print(escalations_table(waiting, now))


@app.command()
@friendly
def answer(
    gate_id: str = typer.Argument(
        ..., help="The gate id, or several separated by commas (g-1,g-2,g-3): each gets the same answer."
    ),
    action: str = typer.Argument(
        ..., help="approve | correct | reject | hold | withdraw, or dialog to ask the agents first"
    ),
    text: str = typer.Argument("", help="What you say to the agents."),
    responder: Optional[str] = typer.Option(
        None,
        envvar="VICAR_RESPONDER",
        show_default="$VICAR_RESPONDER, else your OS user name",
        help="Who answers: recorded with the answer and checked against the principal's allow-list.",
    ),
    timeout: float = typer.Option(ANSWER_TIMEOUT, min=0.1, help="Seconds each gate has to take the answer."),
    ask_first: bool = typer.Option(
        False, "--ask-first", help="… but ask me first: Vicar never answers gates of this kind alone for you."
    ),
    output: Output = OUTPUT,
) -> None:
    """Answer escalated gates as the human. Several gates (ids separated by commas) are
    answered over one connection, each through the same validated update, with one line
    (or JSON row) per gate; the exit code is the first refused gate's, 0 if all took it."""
    if responder is None:
        import getpass

        try:
            responder = getpass.getuser()
        except (OSError, KeyError):  # no login name in the environment or the user database
            raise InvalidInput("cannot tell who is answering: give --responder or set VICAR_RESPONDER") from None
    ids = list(dict.fromkeys(g.strip(" ") for g in gate_id.split(",")))  # an id is shown as given
    if not all(ids):
        raise InvalidInput(f"an empty gate id in {gate_id!r}: separate gate ids with single commas")
    ans = HumanAnswer(action=action, text=text, responder=responder, ask_first=ask_first)
    settings = Settings.from_env()
    settings.check_texts(answer_text=ans.text)
    asyncio.run(_answer(settings, ids, ans, timeout, output))


async def _answer(settings: Settings, ids: list[str], ans: HumanAnswer, timeout: float, output: Output) -> None:
    from vicar.cli.base import explain
    from vicar.client.gates import answer_gate, answer_gates, check_action

    check_action(ans.action)  # before connecting: a typo is reported even with no server
    client = await open_client(settings)
    if len(ids) == 1 and output is Output.table:
        console.print(text(await answer_gate(client, ids[0], ans, timeout)))  # an error: one line, its code
        return
    rows: list[tuple[str, str, int]] = []  # gate, what it said, exit code
    for gate, outcome in zip(ids, await answer_gates(client, ids, ans, timeout)):
        rows.append((gate, *((outcome, 0) if isinstance(outcome, str) else explain(outcome))))
    if output is Output.json:
        keys = ("gate_id", "message", "exit_code")
        sys.stdout.write(json.dumps([{**dict(zip(keys, r)), "ok": r[2] == 0} for r in rows], indent=2) + "\n")
    else:
        for gate, message, code in rows:
            console.print(text(f"{gate}: {message if code == 0 else 'error: ' + message}", one_line=True))
    failed = [code for _, _, code in rows if code]
    if failed:
        raise typer.Exit(failed[0])
