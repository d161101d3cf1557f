"""The `vicar` command line."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sqlite3
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Optional

import click
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vicar import contracts as c
from vicar import settings_env
from vicar.config import ANSWER_TIMEOUT, Settings
from vicar.display import text
from vicar.errors import (INTERRUPTED, UNEXPECTED, BrokenStore, InvalidInput, NotFound, NotInstalled, Unreachable,
                          VicarError, validation_summary)
from vicar.memory.names import child_path
from vicar.memory.text import clip
from vicar.models import CfAState, EscalationMode, GateRequest, HumanAnswer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Vicar: a human proxy for approval gates.")
gate_app = typer.Typer(no_args_is_help=True, help="Open approval gates.")
memory_app = typer.Typer(no_args_is_help=True, help="Inspect a principal's memory.")
eval_app = typer.Typer(no_args_is_help=True, help="Evaluate the proxy on real reviewers' decisions.")
session_app = typer.Typer(no_args_is_help=True, help="Working sessions: show one, end one.")
principal_app = typer.Typer(no_args_is_help=True, help="Who may answer for a principal; where its memory lives.")
app.add_typer(gate_app, name="gate")
app.add_typer(memory_app, name="memory")
app.add_typer(eval_app, name="eval")
app.add_typer(session_app, name="session")
app.add_typer(principal_app, name="principal")


class Output(str, Enum):
    table = "table"
    json = "json"


OUTPUT = typer.Option(Output.table, "-o", "--output", help="table for people, json for scripts (stdout is then JSON only).")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"vicar {version('vicar')}\n")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print Vicar's version and exit."),
) -> None:
    """Vicar: a human proxy for approval gates."""

# No emoji codes: ":smile:" in a question stays ":smile:".
# Piped (CI logs): wide enough that report tables keep every column readable.
LOG_WIDTH = 240
console = Console(width=None if sys.stdout.isatty() else LOG_WIDTH, emoji=False)
err = Console(stderr=True, soft_wrap=True, emoji=False)  # an error stays one line
MAX_ERROR_CHARS = 2000  # an error line embeds user input; it stays readable
MAX_GATE_FILE_BYTES = 2_000_000  # a GateRequest's texts total ~225k characters; JSON escapes need up to 6 bytes each


def explain(exc: Exception) -> tuple[str, int]:
    """The one line and exit code for an error (the codes are listed in vicar/errors.py)."""
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, VicarError):
        return str(exc), exc.exit_code
    if isinstance(exc, ValidationError):
        return f"invalid {exc.title}: {validation_summary(exc)}", InvalidInput.exit_code
    if isinstance(exc, UnicodeError):  # e.g. undecodable bytes in an argument, sent on to Temporal
        return f"not valid UTF-8 text: {exc}", InvalidInput.exit_code
    if isinstance(exc, sqlite3.DatabaseError):
        return f"a memory store cannot be read: {exc}", BrokenStore.exit_code
    if isinstance(exc, RPCError) and exc.status == RPCStatusCode.UNAVAILABLE:
        return f"Temporal is unavailable: {exc}", Unreachable.exit_code
    return f"unexpected {type(exc).__name__}: {exc} (VICAR_DEBUG=1 shows the traceback)", UNEXPECTED


def friendly(fn):
    """Every failure becomes one red line and a distinct exit code — never a traceback
    (unless VICAR_DEBUG=1, for developers)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, click.exceptions.Exit, click.exceptions.Abort, click.exceptions.ClickException):
            raise  # typer's own exits and usage errors
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as exc:
            if settings_env.debug() and not isinstance(exc, (VicarError, ValidationError)):
                raise
            message, code = explain(exc)
            err.print(Text.assemble(("error:", "red"), " ", text(clip(message, MAX_ERROR_CHARS), one_line=True)))
            raise typer.Exit(code) from None

    return wrapper


def _client(settings: Settings):
    from vicar.connect import connect

    return connect(settings)


# -- demo and worker ---------------------------------------------------------------


@app.command()
@friendly
def demo(
    principal: Optional[str] = typer.Option(None, help="Principal name (default: alice, or alice-2, alice-3... "
                                                       "when an earlier demo's memory has the name)."),
    gates: int = typer.Option(24, min=1, max=500, help="How many gates to open."),
    human_delay: float = typer.Option(0.2, min=0.0, help="Seconds the scripted human takes to answer."),
    keep: bool = typer.Option(False, "--keep", help="Keep the embedded server and its UI up after the session, "
                                                    "until Ctrl-C."),
) -> None:
    """Run a scripted session: gates open, the proxy learns from the human's answers."""
    from vicar.demo import claim_principal
    from vicar.models import check_principal

    settings = Settings.from_env()
    principal, said = claim_principal(settings.principals_dir, None if principal is None else check_principal(principal))
    asyncio.run(_demo(settings, principal, gates, human_delay, keep, said))


async def _demo(settings: Settings, principal: str, gates: int, human_delay: float, keep: bool = False,
                said: str = "") -> None:
    from vicar.memory.embedder import make_embedder
    from vicar.demo import demo_autonomy, demo_task_queue, render_summary, run_demo
    from vicar.locks import WorkerLock
    from vicar.worker import build_worker, stop_on_signals, temporal_client

    console.print(text(f"Data directory: {settings.data_dir}"))
    if said:
        console.print(text(said))
    console.print(text(demo_autonomy(child_path(settings.principals_dir, principal))))
    # Its own task queue, so a demo runs next to `vicar worker` and other demos; locked
    # before the server, so a clash starts nothing.
    task_queue = demo_task_queue(principal)
    owner = WorkerLock(settings.data_dir, task_queue, "vicar demo")
    with console.status("Starting Temporal (embedded dev server) …"):
        ctx = temporal_client(settings)
        client, server = await ctx.__aenter__()
    try:
        where = f"embedded server at {server.address}" if server else f"Temporal at {client.service_client.config.target_host}"
        console.print(text(f"Connected to {where}."))
        if server and not server.started_here:
            console.print(f"It was started by another Vicar process (pid {server.started_by}) "
                          "and stays up after this demo while any other Vicar process uses it.")
        with console.status("Loading the embedding model (all-MiniLM-L6-v2, local) …"):
            await asyncio.to_thread(make_embedder, params=settings.embedder)
        # Unsharded whatever the deployment: the demo's own queue and memory, in this process.
        worker, registry = build_worker(client, settings.model_copy(update={"shard_count": None}),
                                        task_queue=task_queue)
        try:
            async with worker:
                summary = await run_demo(client, principal, gates, worker.task_queue, registry, console,
                                         human_delay, settings)
                # A link only while it works: without --keep the server goes with the demo.
                render_summary(summary, console, principal)
                if server and keep:
                    # The worker stays too: the UI's queries of a gate need one.
                    console.print(text(f"--keep: the server and the UI stay up at {server.ui_url}/namespaces/"
                                       "default/workflows until Ctrl-C."))
                    with stop_on_signals() as stop:
                        await stop.wait()
                    console.print("Stopping the worker and the embedded server (unless another Vicar process "
                                  "still uses it).")
        finally:
            registry.close()
        if server and not keep:
            console.print("The embedded server stops now unless another Vicar process still uses it; "
                          "`vicar demo --keep` keeps it, a worker and the Temporal UI up until Ctrl-C.")
    finally:
        await ctx.__aexit__(*sys.exc_info())
        owner.release()


@app.command("codec-server")
@friendly
def codec_server(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback: only this machine)."),
    port: int = typer.Option(8081, help="Port (0: any free one, printed)."),
    origin: Optional[list[str]] = typer.Option(None, help="A Temporal UI origin allowed by CORS (repeatable; "
                                                          "default the embedded UI's)."),
) -> None:
    """Serve Temporal's codec protocol so the Web UI and `temporal` CLI show sealed payloads (docs/codec.md)."""
    from vicar.codec_server import run

    run(Settings.from_env(), host, port, origin or [], lambda line: console.print(text(line)))


@app.command()
@friendly
def worker(
    shards: Optional[str] = typer.Option(
        None, "--shards", envvar="VICAR_SHARDS",
        help="With VICAR_SHARD_COUNT set: the shards whose memories this worker holds: 'all' (default), "
             "'0-3', '0,2,5', or 'pod:R' (a StatefulSet pod of R replicas, by its hostname's ordinal)."),
) -> None:
    """Run the worker (starts the embedded Temporal server unless TEMPORAL_ADDRESS is set)."""
    from vicar.worker import configure_logging, serve

    configure_logging()
    settings = Settings.from_env()
    if shards is not None:
        settings.shards = shards
    served = settings.served_shards()  # a bad spec: one line, before anything starts

    def ready(client, server) -> None:
        target = server.address if server else client.service_client.config.target_host
        console.print(f"Worker ready on {target}" + (f"; UI at {server.ui_url}" if server else ""))
        if server and not server.started_here:
            console.print(f"(the embedded server was started by another Vicar process, pid {server.started_by})")

        if served:
            console.print(f"Serving shards {', '.join(map(str, served))} of {settings.shard_count}")

    asyncio.run(serve(settings, on_ready=ready, command="vicar worker"))


# -- gates ---------------------------------------------------------------------------


@gate_app.command("start")
@friendly
def gate_start(
    file: Optional[Path] = typer.Argument(None, help="GateRequest as JSON ('-' for stdin)."),
    principal: Optional[str] = typer.Option(None, help="The human the proxy stands in for."),
    gate_id: Optional[str] = typer.Option(None, "--gate-id", help="Unique id of this gate (the workflow id derives "
                                                                   "from it)."),
    state: Optional[CfAState] = typer.Option(None, help="What is being approved: the intent, the plan or the work."),
    task_type: Optional[str] = typer.Option(None, "--task-type", help="The kind of task, e.g. db-migration."),
    question: Optional[str] = typer.Option(None, help="The question the human would be asked."),
    artifact: Optional[str] = typer.Option(None, help="Artifact text: the plan, the diff, the deliverable."),
    artifact_path: list[str] = typer.Option([], "--artifact-path", help="A file to read as the artifact (under "
                                                                         "VICAR_ARTIFACT_ROOTS); repeatable."),
    actor_message: Optional[str] = typer.Option(None, "--actor-message", help="What the agent says with it."),
    escalation_mode: Optional[EscalationMode] = typer.Option(
        None, "--escalation-mode", help="when_unsure (default): the proxy answers only when it has earned it; "
                                        "always: the human; never: the proxy."),
    upstream_agent: Optional[str] = typer.Option(None, "--upstream-agent", help="The agent that produced the "
                                                                                 "artifact."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help="Join this working session."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the gate's result, print it as JSON and exit with "
                                                    "its outcome: 0 approve, 10 correct, 11 reject, 12 hold, "
                                                    "13 withdraw, 14 timed out."),
    output: Output = OUTPUT,
) -> None:
    """Open a gate from a JSON file and/or flags (flags override the file). Sending the
    same request again attaches to the existing gate; another request under its id is
    refused (exit 5)."""
    data: dict = {}
    if file is not None:
        data = _read_gate_file(file)
    flags = dict(principal=principal, gate_id=gate_id, state=state, task_type=task_type, question=question,
                 artifact_text=artifact, actor_message=actor_message, escalation_mode=escalation_mode,
                 upstream_agent=upstream_agent, artifact_paths=artifact_path or None, session_id=session_id)
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
    from vicar.errors import OUTCOME_EXIT, TIMED_OUT_EXIT
    from vicar.gates import start_gate

    client = await _client(settings)
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
    timeout: float = typer.Option(0.0, min=0.0, help="Seconds to wait for a gate that has no result yet "
                                                      "(0: do not wait)."),
) -> None:
    """Print an earlier gate's result as JSON. Exit 8 if it has none yet, 5 if it ended
    without one (failed, cancelled, terminated), 3 if there is no such gate."""
    asyncio.run(_gate_result(Settings.from_env(), gate_id, timeout))


async def _gate_result(settings: Settings, gate_id: str, timeout: float) -> None:
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from vicar.client import GateHandle
    from vicar.errors import Conflict, Pending
    from vicar.gates import find_gate

    client = await _client(settings)
    handle, description = await find_gate(client, gate_id)  # one describe: the handle's and the status
    gate = GateHandle(gate_id=gate_id, workflow_id=handle.id, client=client)
    running = description.status == WorkflowExecutionStatus.RUNNING
    try:
        if running and not timeout:
            raise asyncio.TimeoutError
        result = await gate.result(timeout=timeout if running else None)
    except asyncio.TimeoutError:
        details = await gate.details()
        raise Pending(f"gate {gate_id!r} has no result yet (status: "
                      f"{details.status.value if details else 'starting'})") from None
    except WorkflowFailureError as exc:
        status = (await client.get_workflow_handle(gate.workflow_id).describe()).status
        cause = getattr(exc.cause, "message", None) or str(exc.cause or exc)
        raise Conflict(f"gate {gate_id!r} ended without a result ({status.name.lower()}): {cause}") from None
    sys.stdout.write(result.model_dump_json(indent=2) + "\n")


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

    req = GateRequest(kind="question", principal=principal, gate_id=question_id or f"q-{uuid.uuid4().hex[:12]}",
                      state=state, task_type=task_type, question=question, actor_message=context)
    settings = Settings.from_env()
    _check_request(settings, req)
    asyncio.run(_ask(settings, req, wait))


async def _ask(settings: Settings, req: GateRequest, wait: bool) -> None:
    from vicar.gates import gate_details, start_gate

    client = await _client(settings)
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
            err.print(text(f"question {req.gate_id} is waiting for {req.principal}: "
                           f"vicar answer {req.gate_id} answer \"...\""))
            told = True
    result = task.result()
    console.print(text(f"answered by the {result.answered_by.value}: {result.text}"))


@app.command()
@friendly
def schema(
    out: Optional[Path] = typer.Option(
        None, help="Write interface.json and one NAME.json per payload into this directory, "
                   "instead of printing one JSON document."),
) -> None:
    """The gate's contract for clients in other languages: the workflow's interface
    (type, id, task queue, updates, signals, queries) and JSON Schema for every payload."""
    from vicar.schema import document

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
    """List the gates waiting for a human, oldest first, with how long each has waited,
    the question and the proxy's guess. Reads Temporal's visibility: no worker needed."""
    asyncio.run(_escalations(principal, output))


def _waited(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "?"
    seconds = max(int((now - since).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


async def _escalations(principal: str | None, output: Output) -> None:
    from vicar.gates import list_escalations

    client = await _client(Settings.from_env())
    waiting = await list_escalations(client, principal)
    now = datetime.now(timezone.utc)
    if output is Output.json:
        rows = [{**d.model_dump(mode="json"),
                 "waited_seconds": round((now - d.escalated_at).total_seconds(), 1) if d.escalated_at else None}
                for d in waiting]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not waiting:
        console.print("No gate is waiting for a human.")
        return
    table = Table(title="Waiting for a human")
    for col in ("gate", "principal", "waited", "state", "task type", "question", "proxy guess", "confidence", "guard"):
        # Ids are what a person copies into `vicar answer`: folded, never cut.
        table.add_column(col, overflow="fold", min_width=len(col) if col not in ("gate", "principal") else None)
    for d in waiting:
        guess = f"{d.proxy_action.value}: {d.proxy_text}" if d.proxy_action else d.proxy_text
        if d.dialog:
            guess += "\n" + "\n".join(f"{t.speaker}{f' ({t.responder})' if t.responder else ''}: {t.text}"
                                       for t in d.dialog)
        guard = d.calibration_guard + (f" ({d.calibration_note})" if d.calibration_note else "")
        gate = d.gate_id if d.workflow_id in ("", c.gate_workflow_id(d.gate_id)) else d.workflow_id
        table.add_row(*map(text, (gate, d.principal, _waited(d.escalated_at, now), d.state.value, d.task_type,
                                  d.question, guess,
                                  f"{d.proxy_confidence:.2f}" if d.proxy_confidence is not None else "", guard)))
    console.print(table)


@app.command()
@friendly
def answer(
    gate_id: str = typer.Argument(...),
    action: str = typer.Argument(..., help="approve | correct | reject | hold | withdraw, or dialog to ask the agents first"),
    text: str = typer.Argument("", help="What you say to the agents."),
    responder: Optional[str] = typer.Option(
        None, envvar="VICAR_RESPONDER", show_default="$VICAR_RESPONDER, else your OS user name",
        help="Who answers: recorded with the answer and checked against the principal's allow-list."),
    timeout: float = typer.Option(ANSWER_TIMEOUT, min=0.1, help="Seconds the gate has to take the answer."),
) -> None:
    """Answer an escalated gate as the human."""
    if responder is None:
        import getpass

        try:
            responder = getpass.getuser()
        except (OSError, KeyError):  # no login name in the environment or the user database
            raise InvalidInput("cannot tell who is answering: give --responder or set VICAR_RESPONDER") from None
    ans = HumanAnswer(action=action, text=text, responder=responder)
    settings = Settings.from_env()
    settings.check_texts(answer_text=ans.text)
    asyncio.run(_answer(settings, gate_id, ans, timeout))


async def _answer(settings: Settings, gate_id: str, ans: HumanAnswer, timeout: float) -> None:
    from vicar.gates import answer_gate, check_action

    check_action(ans.action)  # before connecting: a typo is reported even with no server
    client = await _client(settings)
    console.print(text(await answer_gate(client, gate_id, ans, timeout)))


# -- principals ---------------------------------------------------------------------------


@principal_app.command("allow")
@friendly
def principal_allow(principal: str = typer.Argument(...), names: list[str] = typer.Argument(None),
                    anyone: bool = typer.Option(False, "--anyone", help=(
                        "Reset: no list, anyone who can reach the gates may answer.")),
                    by: str = typer.Option(None, "--by", help="Who makes the change (default: the OS user).")
                    ) -> None:
    """Let these responders answer for PRINCIPAL (logged in responders.log with who and when)."""
    from vicar.responders import change_allowed

    if bool(names) == anyone:
        raise VicarError("give the names to allow, or --anyone (not both)")
    _print_policy(principal, change_allowed(Settings.from_env().principals_dir, principal,
                                            "anyone" if anyone else "allow", names or [], by))


@principal_app.command("disallow")
@friendly
def principal_disallow(principal: str = typer.Argument(...), names: list[str] = typer.Argument(...),
                       by: str = typer.Option(None, "--by", help="Who makes the change (default: the OS user).")
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

    client = await _client(settings)
    handle = await client.start_workflow(
        c.MOVE_WORKFLOW, c.MoveInput(principal=principal, to_shard=to_shard), id=c.move_workflow_id(principal),
        task_queue=settings.task_queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        result_type=c.MoveReport)
    with console.status(f"Moving {principal}'s memory to shard {to_shard} (workflow {handle.id}) …"):
        report = await handle.result()
    if not report.moved:
        console.print(f"{principal}'s memory is on shard {report.from_shard} already", markup=False)
    else:
        console.print(f"moved {principal}'s memory from shard {report.from_shard} to shard {report.to_shard}: "
                      f"{report.outcomes} outcomes, {report.archive_bytes} bytes archived; the old copy is removed",
                      markup=False)


def _print_policy(principal: str, policy) -> None:
    console.print(f"may answer for {principal}: {', '.join(policy.responders)}" if policy.responders else
                  f"anyone who can reach {principal}'s gates may answer (no allow-list)" if policy.anyone else
                  f"nobody may answer for {principal} (the list was emptied; reopen with --anyone or a name)",
                  markup=False, highlight=False)


# -- sessions ---------------------------------------------------------------------------


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

    from vicar.models import SessionSummary, check_principal

    check_principal(principal)
    client = await _client(Settings.from_env())
    handle = client.get_workflow_handle(c.session_workflow_id(principal, session_id))
    try:
        if end:
            await handle.signal("end")
            console.print(text(f"session {session_id} of {principal} ends: consolidation starts"))
            return
        s = await handle.query("summary", result_type=SessionSummary)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"no session {session_id!r} for principal {principal!r}") from None
        raise
    console.print(text(f"session {s.session_id} of {s.principal}: {s.status}"
                       + (f" (ended by {s.ended_by})" if s.ended_by else "")
                       + f"; working memory {s.working_memory_chunks} chunks, ~{s.working_memory_tokens} tokens at N={s.n_at_start}"))
    console.print(f"gates: {len(s.gates)} ({sum(g.done for g in s.gates)} done); LLM calls {s.usage.calls}, "
                  f"cost ${s.usage.cost_usd:.4f}, cache saved ${s.usage.cache_savings_usd:.4f}")
    if s.consolidation:
        r = s.consolidation
        console.print(text(f"consolidation: {', '.join(f'{k} {v}' for k, v in sorted(r.counts.items())) or 'nothing to do'}; "
                           f"superseded {len(r.superseded)}, tensions {r.tensions}"))


# -- memory ---------------------------------------------------------------------------


@contextmanager
def _open_store(principal: str):
    """A principal's record store, read directly (no worker needed); a store that cannot
    be read (junk bytes, corrupt rows) is one line pointing at `vicar memory check`."""
    from vicar.memory.store import RecordStore, RecordsUnusable
    from vicar.models import check_principal

    settings = Settings.from_env()
    path = child_path(settings.principals_dir, check_principal(principal)) / "memory.db"
    if not path.exists():
        raise NotFound(f"no memory for principal {principal!r} under {settings.principals_dir}")

    def broken(exc: Exception) -> BrokenStore:
        reason = validation_summary(exc) if isinstance(exc, ValidationError) else str(exc)
        return BrokenStore(f"the memory store {path} cannot be read ({reason}); "
                           f"run `vicar memory check {principal}`")

    try:
        store = RecordStore(path)
    except (sqlite3.DatabaseError, RecordsUnusable) as exc:
        raise broken(exc.__cause__ or exc if isinstance(exc, RecordsUnusable) else exc) from None
    try:
        yield store
    except (sqlite3.DatabaseError, ValidationError) as exc:
        raise broken(exc) from None
    finally:
        store.close()


@memory_app.command("stats")
@friendly
def memory_stats(principal: str = typer.Argument(...)) -> None:
    """Size and shape of a principal's memory (reads the store directly)."""
    with _open_store(principal) as store:
        table = Table(title=text(f"Memory of {principal}"))
        table.add_column("what")
        table.add_column("value", justify="right")
        rows = {
            "chunks": store.count(),
            "answered by the human": store.count("answered_by = 'human'"),
            "answered by the proxy": store.count("answered_by = 'proxy'"),
            "traces": store.trace_count(),
            "interaction counter N": store.counter(),
            "memory depth (state, task type pairs)": store.memory_depth(),
            "embedding model": store.get_meta("embedding_model") or "",
        }
        for k, v in rows.items():
            table.add_row(k, text(v))
    console.print(table)


@app.command()
@friendly
def health(principal: str = typer.Argument(..., help="The human whose answers to look at.")) -> None:
    """Approval-rate trends per state and task type over the latest sessions; flags drops."""
    from vicar.models import OutcomeRecord
    from vicar.proxy.bookkeeping import ContextEntry
    from vicar.proxy.health import DROP, SESSIONS, autonomy_rules, context_health, known_principals, rule_lines
    from vicar.proxy.trust import ledger

    settings = Settings.from_env()
    try:
        with _open_store(principal) as store:
            records = [OutcomeRecord.model_validate_json(r) for _, r in store.outcomes(answered_by="human")]
            entries = [ContextEntry.model_validate_json(e) for _, e in store.context_entries()]
            rules = autonomy_rules(store, child_path(settings.principals_dir, principal),
                                   settings.calibration.autonomy, sorted({(e.state, e.task_type) for e in entries}))
            agents = ledger(*store.agent_ledger_rows())
    except NotFound as exc:
        raise NotFound(f"{exc}; {known_principals(settings.principals_dir)}") from None
    ema = {(e.state, e.task_type): e.ema_approval_rate for e in entries}
    rows = context_health(records, ema)
    if not rows:
        console.print(text(f"No human answers recorded for {principal} yet."))
        return
    table = Table(title=text(f"Approval rate of {principal}, latest {SESSIONS} sessions per context (oldest first)"))
    for col in ("state", "task type", "human answers", "answered by", "sessions", "approval rate per session",
                "EMA", "trend"):
        table.add_column(col, overflow="fold")
    for h in rows:
        trend = text("" if h.earlier is None else f"{h.earlier:.2f} -> {h.later:.2f}")
        if h.flagged:
            trend = text(f"DROP {trend}", "bold red")
        table.add_row(text(h.state), text(h.task_type), str(h.human_answers),
                      text(", ".join(f"{who} {k}" for who, k in h.responders.items())), str(len(h.sessions)),
                      " ".join(f"{r:.2f}" for r in h.approval_rates),
                      "" if h.ema_approval_rate is None else f"{h.ema_approval_rate:.2f}", trend)
    console.print(table)
    table = Table(title=text(f"Autonomy rule of {principal}: evidence pooled over every gate, parameters per state"))
    for col in ("state", "task type", "target error", "proven threshold", "error bound", "evidence", "errors",
                "audit share"):
        table.add_column(col, overflow="fold")
    for (state, task_type), r in rules.items():
        table.add_row(text(state), text(task_type), f"{r.target:g}",
                      "none" if r.threshold is None else f"{r.threshold:.2f}", f"{r.bound:.3f}",
                      str(r.evidence), str(r.errors), f"{r.audit_share:g}")
    console.print(table)
    for line in rule_lines(rules):  # the demo's footer says the same, from the same function
        console.print(text(line))
    if agents:
        table = Table(title=text(f"Trust ledger of the upstream agents at {principal}'s gates (least trusted first)"))
        for col in ("agent", "approved", "corrected", "rejected", "other", "answered alone", "overrides",
                    "regret", "trust"):
            table.add_column(col, overflow="fold")
        for t in agents:
            table.add_row(text(t.agent), str(t.approvals), str(t.corrections), str(t.rejections), str(t.other),
                          str(t.alone), str(t.overrides), str(t.regrets), f"{t.score:.2f}")
        console.print(table)
    flagged = [h for h in rows if h.flagged]
    if flagged:
        console.print(Text.assemble(text(f"{len(flagged)} context(s) dropped by >= {DROP:.1f} in approval rate:",
                                         "bold red"), " ", text(", ".join(f"{h.state}/{h.task_type}" for h in flagged))))


@memory_app.command("censors")
@friendly
def memory_censors(
    principal: str = typer.Argument(...),
    show: str = typer.Option(None, "--show", help="One censor, whole: trigger, reason, provenance, counts."),
    disable: str = typer.Option(None, "--disable", help="Stop a censor from firing (kept, and not re-learned)."),
    enable: str = typer.Option(None, "--enable", help="Let a disabled or deactivated censor fire again."),
) -> None:
    """The principal's censors: constraints learned from repeated corrections and rejections."""
    chosen = [o for o in (show, disable, enable) if o is not None]
    if len(chosen) > 1:
        raise InvalidInput("give at most one of --show, --disable, --enable")
    with _open_store(principal) as store:
        if disable is not None or enable is not None:
            from vicar.proxy.censors import switched

            cid = disable if disable is not None else enable
            changed = store.update_censor(cid, lambda c: switched(c, enabled=enable is not None))
            if changed is None:
                raise NotFound(f"no censor {cid!r} for principal {principal!r}")
            console.print(text(f"censor {cid}: {changed.status} ({changed.action})"))
            return
        censors = store.censors()
    if show is not None:
        c = next((c for c in censors if c.id == show), None)
        if c is None:
            raise NotFound(f"no censor {show!r} for principal {principal!r}")
        table = Table(title=text(f"Censor {c.id} of {principal}"))
        table.add_column("what")
        table.add_column("value", overflow="fold")
        for k, v in c.model_dump(exclude={"vectors"}).items():
            table.add_row(k, text(", ".join(v) if isinstance(v, list) else v))
        table.add_row("trigger dimensions", text(", ".join(c.vectors)))
        console.print(table)
        return
    if not censors:
        console.print(text(f"No censors learned for {principal} yet."))
        return
    table = Table(title=text(f"Censors of {principal}"))
    for col in ("id", "status", "action", "severity", "pattern", "reason", "fired", "confirmed", "false positives",
                "learned at N"):
        table.add_column(col, overflow="fold")
    for c in censors:
        table.add_row(text(c.id), c.status, c.action, f"{c.severity:.2f}", text(c.pattern), text(c.reason),
                      str(c.activations), str(c.confirmations), str(c.false_positives), str(c.created_n))
    console.print(table)


@memory_app.command("reembed")
@friendly
def memory_reembed(
    principal: str = typer.Argument(...),
    to: str = typer.Option(..., "--to", help="minilm | openai"),
) -> None:
    """Re-embed a principal's memory with another model (resumable)."""
    from rich.progress import Progress

    from vicar.memory.embedder import make_embedder
    from vicar.memory.reembed import reembed

    settings = Settings.from_env()
    embedder = make_embedder(to, cache_file=settings.embedding_cache, params=settings.embedder)
    with Progress(console=console) as progress:
        task = progress.add_task(f"re-embedding with {embedder.model_name}", total=None)
        n = reembed(settings.principals_dir, principal, embedder,
                    progress=lambda done, total: progress.update(task, completed=done, total=total),
                    blended=settings.memory.blended_vectors)
    console.print(text(f"{principal}: {n} chunks re-embedded with {embedder.model_name}" if n
                       else f"{principal} already uses {embedder.model_name}"))


@memory_app.command("check")
@friendly
def memory_check(principal: str = typer.Argument(...)) -> None:
    """Check a principal's memory on disk: SQLite integrity, schema, records against vectors.
    Read-only (runs beside the worker); exit code 6 when broken."""
    from vicar.memory.check import check, summary

    settings = Settings.from_env()
    report = check(settings.principals_dir, principal, settings.memory.blended_vectors)
    console.print(summary(report), soft_wrap=True, highlight=False, markup=False)
    for problem in report.problems[1:] + ([report.disk_full] if report.problems and report.disk_full else []):
        console.print(f"  also: {problem}", soft_wrap=True, highlight=False, markup=False)
    if report.records_by_dimension:
        console.print("  records/vectors per dimension: " + ", ".join(
            f"{d} {n}/{report.vectors_by_dimension.get(d, 0)}" for d, n in sorted(report.records_by_dimension.items())),
            soft_wrap=True, highlight=False, markup=False)
    if not report.healthy:
        from vicar.memory.diskfull import DiskFull

        raise typer.Exit(BrokenStore.exit_code if report.problems else DiskFull.exit_code)


@memory_app.command("repair")
@friendly
def memory_repair(principal: str = typer.Argument(...)) -> None:
    """Rebuild a principal's vectors from its records (the source of truth). Refused while a
    worker has the memory open; exit code 6 when the records themselves are broken."""
    from vicar.memory.check import repair
    from vicar.memory.embedder import make_embedder

    settings = Settings.from_env()
    r = repair(settings.principals_dir, principal, make_embedder(cache_file=settings.embedding_cache, params=settings.embedder),
               settings.memory)  # a corrupt memory.db: RecordsUnusable, one line, exit code 6
    console.print(f"{principal}: vectors of {r.rebuilt} of {r.chunks} chunks rebuilt"
                  + (f"; the unreadable vector store was moved to {r.moved_aside}" if r.moved_aside else "")
                  + (f"; LOST RECORDS kept as vectors (see `vicar memory check {principal}`): "
                     f"{', '.join(r.lost_records)}" if r.lost_records else ""),
                  soft_wrap=True, highlight=False, markup=False)


@memory_app.command("backup")
@friendly
def memory_backup(
    principals: Optional[list[str]] = typer.Argument(None, help="Principals to back up."),
    all_: bool = typer.Option(False, "--all", help="Every principal in the data directory."),
    to: Path = typer.Option(..., "--to", help="A new or empty directory for the backup."),
) -> None:
    """Consistent copy of principals' memories (records through SQLite's backup API; vectors
    too when no worker has the memory open). Runs beside a running worker."""
    from vicar.backup import backup

    if bool(principals) == all_:
        raise InvalidInput("name the principals to back up, or give --all")
    manifest = backup(Settings.from_env().principals_dir, principals or None, to)
    for p in manifest.principals:
        console.print(text(f"{p.principal}: {p.chunks} chunks" + ("" if p.vectors else
                      " (records only: the memory is open in a worker; restore rebuilds its vectors)")))
    console.print(text(f"backup written to {to}"))


@memory_app.command("restore")
@friendly
def memory_restore(
    source: Path = typer.Argument(..., help="A directory written by `vicar memory backup`."),
    principals: Optional[list[str]] = typer.Argument(None, help="Principals to restore."),
    all_: bool = typer.Option(False, "--all", help="Every principal in the backup."),
    force: bool = typer.Option(False, "--force", help="Move an existing memory aside and restore over it."),
) -> None:
    """Restore principals' memories from a backup; vectors missing from it are rebuilt
    from the records. Refused while a worker has the memory open."""
    from vicar.memory.check import check, repair
    from vicar.memory.embedder import make_embedder
    from vicar.backup import restore

    if bool(principals) == all_:
        raise InvalidInput("name the principals to restore, or give --all")
    settings = Settings.from_env()

    def rebuild(principal: str) -> int:
        if check(settings.principals_dir, principal, settings.memory.blended_vectors).healthy:
            return 0
        return repair(settings.principals_dir, principal, make_embedder(cache_file=settings.embedding_cache, params=settings.embedder),
                      settings.memory).rebuilt

    for r in restore(source, settings.principals_dir, principals or None, force=force, rebuild=rebuild):
        console.print(text(f"{r.principal}: {r.chunks} chunks restored"
                           + (f", vectors of {r.vectors_rebuilt} rebuilt" if r.vectors_rebuilt else "")
                           + (f"; the memory that was there is now {r.replaced}" if r.replaced else "")))


@eval_app.command("replay")
@friendly
def eval_replay(
    files: list[Path] = typer.Argument(..., help="gate-replay JSONL files (.jsonl or .jsonl.gz)"),
    out: Path = typer.Option(Path("replay-report"), help="Directory for the report and plots."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many gates per reviewer (the first ones)."),
    variants: Optional[str] = typer.Option(None, help="Comma-separated variant names (default: all)."),
    do_sweep: bool = typer.Option(False, "--sweep", help="First sweep d, tau, s and weights; use the best."),
    predictor: Optional[str] = typer.Option(
        None, help="Also replay with an LLM predictor (anthropic | openai): variant composite-<name>. "
                   "Paid calls: needs --limit; the estimated cost is printed first."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask before paid LLM calls."),
    seed: int = typer.Option(0, min=0, max=10**6, help="Other draws of the activation noise and the audits: "
                                                        "rerun with a few seeds to see how much a figure moves by chance."),
) -> None:
    """Replay real reviewers' gates through the proxy and score its predictions."""
    import shlex
    import time

    from vicar.memory.embedder import make_embedder
    from vicar.eval.dataset import load_events
    from vicar.eval.replay import LOCAL_PREDICTORS, standard_variants
    from vicar.eval.report import markdown, plots, summary_table
    from vicar.eval.run import run_variants, sweep, warm_embeddings

    settings = Settings.from_env()
    events = load_events(files)
    if not events:
        raise VicarError("no gate events in " + ", ".join(map(str, files)))
    if predictor is not None:
        predictor = predictor.strip().lower()
        if predictor not in ("anthropic", "openai"):
            raise InvalidInput(f"unknown --predictor {predictor!r}; LLM predictors: anthropic, openai")
        if not limit:
            raise InvalidInput("an LLM replay makes paid calls for every gate: give --limit (gates per reviewer)")
    if limit:
        events = {r: evs[:limit] for r, evs in events.items()}
    total = sum(len(v) for v in events.values())
    console.print(text(f"{total} gates from {len(events)} reviewers: " +
                       ", ".join(f"{r} ({len(v)})" for r, v in events.items())))
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    seconds = warm_embeddings(events, embedder, console)
    console.print(text(f"embeddings ready in {seconds:.1f} s (cached in {settings.embedding_cache})"))
    extra = ""
    base = None
    if do_sweep:
        best, tried = sweep(events, embedder, settings, console)
        base = best
        extra = "\n## Parameter sweep (macro-F1, coordinate search)\n\n" + "\n".join(
            f"- {', '.join(f'{k}={v}' for k, v in upd.items())}: {score:.4f}" for upd, score in tried
        ) + f"\n\nChosen: d={best.decay}, tau={best.threshold}, s={best.noise_s}, " \
            f"w_activation={best.w_activation}, w_similarity={best.w_similarity}\n"
    chosen = standard_variants(base)
    if predictor is not None:
        from vicar.eval.cost import estimate_replay_cost
        from vicar.eval.replay import Variant

        chosen.append(Variant(name=f"composite-{predictor}", predictor=predictor,
                              **({"memory": base} if base else {})))
    if variants:
        wanted = [v.strip() for v in variants.split(",") if v.strip()]
        known = {v.name for v in chosen}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise InvalidInput(f"unknown variant(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}")
        chosen = [v for v in chosen if v.name in wanted]
    chosen = [v.model_copy(update={"seed": seed}) for v in chosen]
    if any(v.predictor not in LOCAL_PREDICTORS for v in chosen):
        est = estimate_replay_cost(events, predictor)
        console.print(f"LLM replay with {est.provider} ({est.model}, classifier {est.classifier_model}): "
                      f"{est.gates} gates, ~{est.input_tokens:,} input and ~{est.output_tokens:,} output tokens, "
                      f"estimated cost at most ${est.usd:.2f} (no cache discount counted)", markup=False)
        if not yes and not typer.confirm("Make these paid calls?", default=False):
            raise VicarError("LLM replay not started: nothing was called")
    start = time.perf_counter()
    results = run_variants(events, chosen, embedder, settings, console)
    console.print(summary_table(results))
    out.mkdir(parents=True, exist_ok=True)
    try:
        figures = plots(results, out)
    except NotInstalled as exc:  # the report is still worth writing
        figures = []
        console.print(text(f"no plots: {exc}"))
    command = "vicar eval replay " + " ".join(shlex.quote(str(a)) for a in sys.argv[3:])
    (out / "report.md").write_text(markdown(results, command, figures, extra))
    (out / "results.json").write_text(json.dumps([r.model_dump(mode="json") for r in results], indent=1))
    console.print(text(f"report: {out / 'report.md'} ({time.perf_counter() - start:.0f} s of replay)"))


# The SDK's native bridge: once loaded, its Rust runtime's threads outlive the command.
TEMPORAL_BRIDGE = "temporalio.bridge.temporal_sdk_bridge"


def main() -> None:
    """The `vicar` command. A process that loaded Temporal's native bridge ends without
    the interpreter's teardown: the bridge's threads can call into Python while it
    finalizes and abort the process with SIGABRT after the command has succeeded
    (temporalio/sdk-python#300; seen here as `vicar answer` exiting -6). Every command
    has closed what it opened by the time it returns, so only the exit code and the
    flushed output are left to give."""
    from vicar.logging_redact import install as install_redaction

    install_redaction()  # the libraries' warnings go through Python's last-resort handler
    try:
        app()
        code = 0
    except SystemExit as done:
        code = done.code
    if not isinstance(code, int):  # sys.exit("message") or None
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    if TEMPORAL_BRIDGE in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
