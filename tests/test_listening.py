"""A port another process holds is one line and Conflict (exit 5) for every server
Vicar runs: the inbox, the demo's inbox and the codec server say it alike."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from vicar.errors import Conflict, InvalidInput
from vicar.runtime.listening import listen


@pytest.fixture
def held_port():
    """A port held by a real second process, as a busy port is in life."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys; s=socket.create_server(('127.0.0.1',0)); print(s.getsockname()[1], flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    yield int(proc.stdout.readline())
    proc.kill()
    proc.wait(10)


def test_a_busy_port_is_a_conflict_naming_the_option(held_port):
    with pytest.raises(Conflict, match=rf"^port {held_port} on 127.0.0.1 is in use .* pass another --inbox-port$"):
        listen("127.0.0.1", held_port, "--inbox-port")
    with pytest.raises(InvalidInput, match="cannot listen on no-such-host.invalid"):
        listen("no-such-host.invalid", 0)
    free = listen("127.0.0.1", 0)
    assert free.getsockname()[1] > 0
    free.close()


def test_the_codec_server_on_a_busy_port_is_the_same_conflict(held_port, tmp_path, monkeypatch):
    from vicar.runtime import codec_server
    from vicar.settings import Settings

    monkeypatch.setenv("VICAR_CODEC_SERVER_TOKEN", "t" * 40)
    said: list[str] = []
    with pytest.raises(Conflict, match=rf"^port {held_port} on 127.0.0.1 is in use"):
        codec_server.run(Settings(data_dir=tmp_path), "127.0.0.1", held_port, [], said.append)
    assert said == []  # nothing claimed to serve
    with socket.create_connection(("127.0.0.1", held_port), timeout=5):
        pass  # the holder still has it
