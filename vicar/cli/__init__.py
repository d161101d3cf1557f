"""The `vicar` command line, one module per command group: base.py holds the app, its
groups and the error rule every command shares; each *_cmd.py adds its commands."""

from __future__ import annotations

import sys

# Importing a command module registers its commands; `vicar --help` lists them in
# registration order, so the newcomer's `demo` comes first and the oversight commands
# (audit, review, rules) last.
# isort: off
from vicar.cli import demo_cmd, eval_cmd, gates_cmd, health_cmd, memory_cmd, principals_cmd  # noqa: F401
from vicar.cli import sessions_cmd, worker_cmd, rules_cmd, audit_cmd, inbox_cmd  # noqa: F401
from vicar.cli import hook_cmd  # noqa: F401  (the coding agents' permission prompts)
from vicar.cli import mcp_cmd  # noqa: F401
from vicar.cli import team_cmd  # noqa: F401

# isort: on
from vicar.cli.base import MAX_ERROR_CHARS, Output, app, console, err, explain, friendly

__all__ = ["MAX_ERROR_CHARS", "Output", "app", "console", "err", "explain", "friendly", "main"]


def main() -> None:
    """The `vicar` command; it ends as vicar.runtime.ending says (every command has closed what it
    opened by the time it returns)."""
    from vicar.runtime.ending import end_process
    from vicar.runtime.logging_redact import install as install_redaction

    install_redaction()  # the libraries' warnings go through Python's last-resort handler
    code: str | int | None
    try:
        app()
        code = 0
    except SystemExit as done:
        code = done.code
    if not isinstance(code, int):  # sys.exit("message") or None
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    end_process(code)
