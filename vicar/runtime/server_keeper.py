"""The embedded server's keeper, a detached process:
`python -m vicar.runtime.server_keeper DATA_DIR STARTER_PID [PORTS_JSON]`.

It outlives the process that started it and runs the Temporal dev server as its child
until no process uses it (see vicar/runtime/server.py).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from vicar.runtime.server import given_ports, keep


def _exit(signum, frame) -> None:
    raise SystemExit(128 + signum)  # through keep()'s cleanup: server stopped, note cleared


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _exit)
    # The ports the settings fix, as JSON (vicar.runtime.server.given_ports); none: the defaults.
    given = given_ports(json.loads(sys.argv[3])) if len(sys.argv) > 3 else {}
    sys.exit(keep(Path(sys.argv[1]), int(sys.argv[2]), given))


if __name__ == "__main__":
    main()
