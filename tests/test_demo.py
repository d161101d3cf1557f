"""`vicar demo` on the embedded default, as a user runs it: a real process, a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def temporal_servers_for(data_dir: Path) -> list[str]:
    # -ww: never cut the command line at $COLUMNS (pytest sets it), or the data dir is lost.
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "start-dev" in line and str(data_dir) in line]


def test_demo_runs_a_session_and_leaves_no_server(tmp_path):
    data_dir = tmp_path / "vicar"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env["VICAR_DATA_DIR"] = str(data_dir)
    # The gate ids carry a run id, so the audit draw differs per run; this test is about
    # learning from the human, so no audit (the guard has its own tests).
    env["VICAR_AUTONOMY_AUDIT_SHARE"] = "0"
    vicar = Path(sys.executable).parent / "vicar"
    proc = subprocess.run(
        [str(vicar), "demo", "--gates", "16", "--human-delay", "0", "--principal", "demo-test"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    m = re.search(r"16 gates in [\d.]+ s: (\d+) decided by the proxy, (\d+) escalated", out)
    assert m, out
    autonomous, escalated = int(m.group(1)), int(m.group(2))
    assert escalated >= 4  # the first wave has no memory at all
    assert autonomous >= 1  # and later waves learned from the human's answers
    # The demo's own rule, said so; the proxy earned it by a proven bound.
    assert "Autonomy rule for this demo" in out and "error is proven <= 40%" in out
    assert (data_dir / "principals" / "demo-test" / "autonomy.json").exists()
    # Where it stands at the end (an error the human caught may have taken it away again).
    assert re.search(r"Autonomy rule at the last gate: (threshold [\d.]+|none proven), error bound [\d.]+ "
                     r"over \d+ human answers", out), out
    assert "Memory: 16 chunks" in out and "Temporal UI: http://127.0.0.1:" in out
    assert temporal_servers_for(data_dir) == []  # the embedded server stopped with the demo
    # The memory outlives the run and the CLI reads it.
    stats = subprocess.run([str(vicar), "memory", "stats", "demo-test"], capture_output=True, text=True,
                           env=env, timeout=60)
    assert stats.returncode == 0 and re.search(r"chunks\s*│\s*16", stats.stdout), stats.stdout


def test_demo_keep_leaves_the_server_and_ui_up_until_ctrl_c(tmp_path):
    import signal
    import time
    import urllib.request

    data_dir = tmp_path / "vicar"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env["VICAR_DATA_DIR"] = str(data_dir)
    vicar = Path(sys.executable).parent / "vicar"
    proc = subprocess.Popen([str(vicar), "demo", "--gates", "2", "--human-delay", "0", "--keep"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline, lines = time.monotonic() + 240, []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if m := re.search(r"--keep: the server and the UI stay up at (http://\S+) until Ctrl-C", line):
                break
            assert line or proc.poll() is None, "".join(lines)
        else:
            raise AssertionError("".join(lines))
        time.sleep(1.0)
        assert temporal_servers_for(data_dir), "the server must still run"
        with urllib.request.urlopen(m.group(1), timeout=30) as page:  # the UI answers
            assert page.status == 200
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, "".join(lines) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
    for _ in range(50):  # the server goes with the demo
        if not temporal_servers_for(data_dir):
            break
        time.sleep(0.2)
    assert temporal_servers_for(data_dir) == []
