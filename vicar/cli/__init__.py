"""The `vicar` command line, one module per command group: base.py holds the app, its
groups and the error rule every command shares; each *_cmd.py adds its commands."""

from __future__ import annotations

import sys

# Imported in this order on purpose: `vicar --help` lists the commands in the order they
# were registered (demo, codec-server, worker, ask, schema, escalations, answer, health).
from vicar.cli import demo_cmd, eval_cmd, gates_cmd, health_cmd, memory_cmd, principals_cmd, sessions_cmd, worker_cmd  # noqa: F401  (registers their commands)  # noqa: F401
from vicar.cli import audit_cmd  # noqa: F401, E402  (registers `vicar audit` and `vicar review`)
from vicar.cli import rules_cmd  # noqa: F401, E402  (registers `vicar rules`)
from vicar.cli.base import MAX_ERROR_CHARS, Output, app, console, err, explain, friendly

__all__ = ["MAX_ERROR_CHARS", "Output", "app", "console", "err", "explain", "friendly", "main"]


def main() -> None:
    """The `vicar` command; it ends as vicar.ending says (every command has closed what it
    opened by the time it returns)."""
    from vicar.ending import end_process
    from vicar.logging_redact import install as install_redaction

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
