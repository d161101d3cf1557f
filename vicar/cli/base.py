"""What every command shares: the app and its groups, the consoles, and the rule that a
failure is one line and a distinct exit code."""

from __future__ import annotations

import functools
import sqlite3
import sys
from enum import Enum

import click
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vicar.display import text
from vicar.errors import (
    INTERRUPTED,
    UNEXPECTED,
    BrokenStore,
    InvalidInput,
    SettingsError,
    Unreachable,
    VicarError,
    validation_summary,
)
from vicar.memory.text import clip
from vicar.settings import Settings, debugging

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


OUTPUT = typer.Option(
    Output.table, "-o", "--output", help="table for people, json for scripts (stdout is then JSON only)."
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"vicar {version('vicar')}\n")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print Vicar's version and exit."
    ),
) -> None:
    """Vicar: a human proxy for approval gates."""


# No emoji codes: ":smile:" in a question stays ":smile:".
# Piped (CI logs): wide enough that report tables keep every column readable.
LOG_WIDTH = 240
console = Console(width=None if sys.stdout.isatty() else LOG_WIDTH, emoji=False)
err = Console(stderr=True, soft_wrap=True, emoji=False)  # an error stays one line
MAX_ERROR_CHARS = 2000  # an error line embeds user input; it stays readable


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
            if debugging() and not isinstance(exc, (VicarError, ValidationError)):
                raise
            message, code = explain(exc)
            # Bad settings: every bad value, one line each.
            for line in exc.lines if isinstance(exc, SettingsError) else [message]:
                err.print(Text.assemble(("error:", "red"), " ", text(clip(line, MAX_ERROR_CHARS), one_line=True)))
            raise typer.Exit(code) from None

    return wrapper


def open_client(settings: Settings):
    from vicar.runtime.connect import connect

    return connect(settings)


def folded_table(title: str, columns: tuple[str, ...]) -> Table:
    """A report table whose cells wrap rather than truncate: a principal's names and
    reasons are read whole, however narrow the terminal."""
    table = Table(title=text(title))
    for col in columns:
        table.add_column(col, overflow="fold")
    return table
