"""One owner per data directory: real Vicar processes sharing one embedded server.

The server stays up while any process uses it and goes away with the last one (even
one killed by SIGKILL); a second worker on the same data directory and task queue is
refused with one line.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from vicar.runtime.server import embedded_address

ROOT = Path(__file__).resolve().parents[1]
VICAR = Path(sys.executable).parent / "vicar"
DATA_DIR_BUSY = 5  # vicar.errors.Conflict: another process serves this data directory


def vicar_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    # Gate ids carry a run id, so the audit draw differs per run: off.
    return {**env, "VICAR_DATA_DIR": str(data_dir), "VICAR_AUTONOMY_AUDIT_SHARE": "0", **extra}


def processes_for(data_dir: Path) -> dict[int, str]:
    """The Temporal servers and keepers of this data directory, from the process table."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if str(data_dir) in args and ("start-dev" in args or "server_keeper" in args):
            found[int(proc.name)] = args
    return found


def servers_for(data_dir: Path) -> list[int]:
    return [pid for pid, args in processes_for(data_dir).items() if "start-dev" in args]


def wait_until_gone(data_dir: Path, timeout: float = 20.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while (left := processes_for(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_two_demos_at_once_share_one_server_and_leave_none(tmp_path):
    data_dir = tmp_path / "vicar"
    env = vicar_env(data_dir)
    # No --principal: the default one must differ even within the same second.
    demos = [
        subprocess.Popen(
            [str(VICAR), "demo", "--gates", "6", "--human-delay", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = []
    for p in demos:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, out + err
        assert re.search(r"6 gates in [\d.]+ s: \d+ decided by the proxy", out), out
        assert "Traceback" not in err, err
        outs.append(out)
    principals = {re.search(r"principal (\S+)", o).group(1) for o in outs}
    assert len(principals) == 2, outs
    # Starting is serialized: one demo started the server, the other said it reused it.
    reused = [o for o in outs if "started by another Vicar process" in o]
    assert len(reused) == 1, outs
    assert "stays up after this demo while any other Vicar process uses it" in reused[0]
    assert wait_until_gone(data_dir) == {}


async def read_until(stream: asyncio.StreamReader, pattern: str, timeout: float = 120.0) -> str:
    seen = []

    async def scan() -> str:
        while line := (await stream.readline()).decode():
            seen.append(line)
            if pattern in line:
                return line
        raise AssertionError(f"no {pattern!r} before the end of output:\n{''.join(seen)}")

    try:
        return await asyncio.wait_for(scan(), timeout)
    except TimeoutError:
        raise AssertionError(f"no {pattern!r} within {timeout} s:\n{''.join(seen)}") from None


async def spawn(tmp_path: Path, data_dir: Path, *cmd: str) -> asyncio.subprocess.Process:
    # stderr (the log) to a file: a pipe nobody reads could fill and stall the process
    with open(tmp_path / f"{len(list(tmp_path.glob('*.log')))}.log", "wb") as log:
        return await asyncio.create_subprocess_exec(
            *cmd, env=vicar_env(data_dir), cwd=str(ROOT), stdout=asyncio.subprocess.PIPE, stderr=log
        )


async def test_server_outlives_its_starter_for_other_users_and_stops_after_the_last(tmp_path):
    data_dir = tmp_path / "vicar"
    a = await spawn(tmp_path, data_dir, str(VICAR), "worker")  # starts the server; task queue 'vicar'
    b = None
    try:
        await read_until(a.stdout, "Worker ready on")
        [server] = servers_for(data_dir)

        # A second worker on the same data directory and task queue: refused, one line.
        dup = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vicar.worker",
            env=vicar_env(data_dir),
            cwd=str(ROOT),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(dup.communicate(), timeout=120)
        assert dup.returncode == DATA_DIR_BUSY, out + err
        lines = [ln for ln in err.decode().splitlines() if ln.strip()]
        assert lines and lines[-1].startswith("error: data directory "), err.decode()
        assert f"already served on task queue 'vicar' by pid {a.pid} (vicar worker)" in lines[-1]
        assert b"Traceback" not in err
        assert a.returncode is None  # the first keeps serving

        # A demo (its own task queue) joins A's server; A, which started it, goes away.
        b = await spawn(tmp_path, data_dir, str(VICAR), "demo", "--gates", "6", "--human-delay", "1")
        await read_until(b.stdout, f"started by another Vicar process (pid {a.pid})")
        a.send_signal(signal.SIGTERM)
        await asyncio.wait_for(a.wait(), timeout=60)
        assert a.returncode == 0
        assert b.returncode is None  # so the demo's gates below ran after A had gone
        assert servers_for(data_dir) == [server]

        out = (await asyncio.wait_for(b.stdout.read(), timeout=180)).decode()
        assert await b.wait() == 0, out
        assert re.search(r"6 gates in [\d.]+ s", out), out
        # B was the last user: it waited for the server to stop.
        assert servers_for(data_dir) == []
        assert wait_until_gone(data_dir) == {}
    finally:
        for p in (a, b):
            if p and p.returncode is None:
                p.kill()
                await p.wait()


async def test_sigkill_of_the_only_user_leaves_no_server(tmp_path):
    data_dir = tmp_path / "vicar"
    w = await spawn(tmp_path, data_dir, str(VICAR), "worker")
    try:
        await read_until(w.stdout, "Worker ready on")
        assert len(servers_for(data_dir)) == 1 and embedded_address(data_dir)
    finally:
        w.kill()  # no cleanup code runs in it
        await w.wait()
    assert wait_until_gone(data_dir) == {}
    assert embedded_address(data_dir) is None  # the keeper cleaned up after its server
