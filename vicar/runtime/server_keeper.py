"""The embedded server's keeper, a detached process:
`python -m vicar.runtime.server_keeper DATA_DIR STARTER_PID [PORTS_JSON [PREFER_JSON]]`.

It outlives the process that started it and runs the Temporal dev server as its child
until no process uses it, starting it again on the same ports if it dies while in use
(see vicar/runtime/server.py). What it does is in server.log beside the database.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path

from vicar.errors import InvalidInput, VicarError
from vicar.runtime.locks import try_lock
from vicar.runtime.server import (
    DEFAULT_PORT,
    DEFAULT_UI_PORT,
    KEEPER_LOCK,
    KEEPER_POLL_SECONDS,
    RESTART_FIRST,
    RESTART_MAX,
    USERS_LOCK,
    EmbeddedServer,
    given_ports,
)


def keep(
    data_dir: Path, started_by: int, given: dict[str, int] | None = None, prefer: dict[str, int] | None = None
) -> int:
    """The keeper's body (run as `python -m vicar.runtime.server_keeper`): start the server,
    note where it is, start it again on the same ports if it dies while anyone uses it,
    stop it once no process holds the users lock."""
    tdir = data_dir / "temporal"
    with open(tdir / KEEPER_LOCK, "r+") as note_file, open(tdir / USERS_LOCK, "a") as users:
        if not try_lock(note_file, fcntl.LOCK_EX):
            return 1  # another keeper runs (starters are serialized: should not happen)

        def write_note(note: dict) -> None:
            note_file.seek(0)
            note_file.truncate()
            note_file.write(json.dumps(note))
            note_file.flush()

        ports: dict[str, int | None] = {**(prefer or {}), **(given or {})}
        restarts = 0
        while True:
            server = EmbeddedServer(
                data_dir,
                port=ports.get("port") or DEFAULT_PORT,
                ui_port=ports.get("ui_port") or DEFAULT_UI_PORT,
                http_port=ports.get("http_port"),
                metrics_port=ports.get("metrics_port"),
                given=given,
            )
            try:
                server.start()
            except VicarError as exc:
                if not restarts:
                    write_note({"error": str(exc), "invalid": isinstance(exc, InvalidInput)})  # the starter says it
                    return 1
                _say(f"the embedded server did not start again: {exc}")
                if _nobody_uses(users, _restart_wait(restarts)):
                    write_note({})
                    return 0
                restarts += 1
                continue
            try:
                write_note(
                    {
                        "address": server.address,
                        "ui_url": server.ui_url,
                        "ports": server.ports,
                        "server_pid": server.pid,
                        "keeper_pid": os.getpid(),
                        "started_by": started_by,
                        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                        "restarts": restarts,
                    }
                )
                assert server._proc is not None  # started above
                while server._proc.poll() is None:
                    time.sleep(KEEPER_POLL_SECONDS)
                    if try_lock(users, fcntl.LOCK_EX):
                        return 0  # the last user is gone; the lock is held until the server is down
                code = server._proc.returncode
            finally:
                ports = dict(server.ports)  # where its users look for it
                server.stop()
                write_note({})
            # It died under its users (killed, crashed): they wait for it on the same
            # address, and their clients connect again once it is back.
            _say(f"the embedded server exited with code {code} while in use; starting it again")
            if _nobody_uses(users, _restart_wait(restarts)):
                return 0
            restarts += 1


def _restart_wait(restarts: int) -> float:
    return min(RESTART_MAX, RESTART_FIRST * 2**restarts)


def _nobody_uses(users, seconds: float) -> bool:
    """Wait `seconds`; True (the users lock then held exclusively) as soon as nobody uses the server."""
    deadline = time.monotonic() + seconds
    while True:
        if try_lock(users, fcntl.LOCK_EX):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(KEEPER_POLL_SECONDS)


def _say(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} vicar keeper: {line}", flush=True)  # server.log


def _exit(signum, frame) -> None:
    raise SystemExit(128 + signum)  # through keep()'s cleanup: server stopped, note cleared


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _exit)
    # The ports the settings fix, as JSON (vicar.runtime.server.given_ports); none: the
    # defaults. Then the ports to take when free (a server started again after its keeper died).
    given = given_ports(json.loads(sys.argv[3])) if len(sys.argv) > 3 else {}
    prefer = given_ports(json.loads(sys.argv[4])) if len(sys.argv) > 4 else {}
    sys.exit(keep(Path(sys.argv[1]), int(sys.argv[2]), given, prefer))


if __name__ == "__main__":
    main()
