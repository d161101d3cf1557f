"""`vicar demo` on the embedded default, as a user runs it: a real process, a real server."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path


def temporal_servers_for(data_dir: Path) -> list[str]:
    # -ww: never cut the command line at $COLUMNS (pytest sets it), or the data dir is lost.
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "start-dev" in line and str(data_dir) in line]


ROOT = Path(__file__).resolve().parents[1]
# The demo's columns, each of which its legend must explain.
COLUMNS = ("N", "gate", "prior", "conf", "by", "action", "proxy's words", "why")


def vicar_cmd(*args: str) -> list[str]:
    # This checkout's code (PYTHONPATH below), as `vicar` runs it.
    return [sys.executable, "-m", "vicar.cli", *args]


def demo_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "VICAR_"))}
    # Wide enough that rich folds nothing: a line is compared whole.
    env.update(VICAR_DATA_DIR=str(data_dir), COLUMNS="1000", PYTHONPATH=str(ROOT))
    return env


def rule_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if re.match(r"Autonomy rule for [\w ]+ gates: ", line)]


def table_rows(output: str, columns: int) -> list[list[str]]:
    return [
        [c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines() if line.count("│") == columns + 1
    ]


def test_demo_explains_itself_and_leaves_no_server(tmp_path):
    from vicar.demo import GUARD_MEANING

    data_dir = tmp_path / "vicar"
    env = demo_env(data_dir)
    # The gate ids carry a run id, so the audit draw differs per run; this test is about
    # learning from the human, so no audit (the guard has its own tests).
    env["VICAR_AUTONOMY_AUDIT_SHARE"] = "0"
    proc = subprocess.run(
        vicar_cmd("demo", "--gates", "16", "--human-delay", "0"),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    m = re.search(
        r"16 gates in [\d.]+ s: (\d+) decided by the proxy \((\d+) of them not what the human would have "
        r"answered\), (\d+) escalated",
        out,
    )
    assert m, out
    autonomous, wrong_alone, escalated = int(m.group(1)), int(m.group(2)), int(m.group(3))
    assert wrong_alone <= autonomous
    assert escalated >= 4  # the first wave has no memory at all
    # The proxy answering alone within 16 gates is no longer asserted: the rule's bound now
    # holds whenever it is read (a betting confidence sequence, fixed-sequence thresholds),
    # which a demo's dozen answers do not prove (docs/autonomy-bound.md); the footer below
    # states what they do prove, and every escalation says why.
    assert autonomous + escalated == 16
    # A named principal, not a random one.
    assert "Principal alice: " in out and "Vicar demo — principal alice" in out
    assert "Autonomy rule for this demo" in out and "error is proven <= 40%" in out
    assert (data_dir / "principals" / "alice" / "autonomy.json").exists()
    # A legend line for every column.
    legend = out.split("Columns:", 1)[1]
    for col in COLUMNS:
        assert f"\n  {col}: " in legend, col
    assert "surprise" in legend  # either its column's meaning or why it is left out
    # The proxy's words at every gate (its answer, or its guess when it escalated).
    rows = table_rows(out, len(COLUMNS)) or table_rows(out, len(COLUMNS) + 1)
    rows = [r for r in rows if r[0].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(1, 17)), out
    for r in rows:
        words = r[COLUMNS.index("proxy's words")]
        assert words == "(no guess)" or re.match(r"(approve|correct|reject|hold|withdraw): \S", words), r
        if r[COLUMNS.index("by")] == "proxy":  # it answered in words, and nothing escalated it
            assert words != "(no guess)" and r[COLUMNS.index("why")] == "", r
    assert sum(r[COLUMNS.index("proxy's words")] != "(no guess)" for r in rows) >= 8
    # Why each escalated gate escalated: the guard and what it saw, and each guard in words.
    reasons = re.findall(r"^  N (\d+): (\w+): (.+)$", out.split("Why each escalated gate", 1)[1], re.M)
    assert len(reasons) == escalated, out
    assert {int(n) for n, _, _ in reasons} == {int(r[0]) for r in rows if r[COLUMNS.index("by")] == "human"}
    for _, guard, note in reasons:
        assert guard in GUARD_MEANING and note.strip(), (guard, note)
        assert f"\n  {guard}: {GUARD_MEANING[guard]}." in out
    # For a few gates, the proxy's words in full and the pre-review behind them (issue 27 item 4).
    words = out.split("the person's own past words behind them (pre-review):", 1)[1]
    assert len(re.findall(r"^  At N \d+ the proxy said (approve|correct|reject|hold|withdraw): \S", words, re.M)) == 3
    assert re.search(r"^    - .+ \((approve|correct|reject|hold)[^,]*, interaction \d+\)$", words, re.M), words
    # The rule's state at the end, in the very words `vicar health` uses right after.
    said = rule_lines(out)
    assert said and all(
        re.match(r"Autonomy rule for \w+( and \w+)* gates: (acts alone from \d+% sure|none proven): ", line)
        for line in said
    ), out
    health = subprocess.run(
        vicar_cmd("health", "alice"), capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert health.returncode == 0, health.stdout + health.stderr
    assert rule_lines(health.stdout) == said, (health.stdout, said)
    # No link that is about to die: only --keep prints the UI's address.
    assert "http://" not in out and "vicar demo --keep" in out
    assert temporal_servers_for(data_dir) == []  # the embedded server stopped with the demo
    # The memory outlives the run and the CLI reads it.
    stats = subprocess.run(
        vicar_cmd("memory", "stats", "alice"), capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert stats.returncode == 0 and re.search(r"chunks\s*│\s*16", stats.stdout), stats.stdout


def test_a_later_demo_takes_a_fresh_name_and_a_given_name_is_kept(tmp_path):
    """Named, yet never on an earlier demo's memory: alice, then alice-2, alice-3; the
    claim is a mkdir, so demos started together never share a name."""
    from concurrent.futures import ThreadPoolExecutor

    from vicar.demo import claim_principal

    principals = tmp_path / "principals"
    assert claim_principal(principals, None)[0] == "alice"
    name, said = claim_principal(principals, None)
    assert name == "alice-2" and "empty" in said and "--principal alice" in said
    with ThreadPoolExecutor(8) as pool:
        names = list(pool.map(lambda _: claim_principal(principals, None)[0], range(8)))
    assert sorted(names, key=lambda n: int(n.split("-")[1])) == [f"alice-{k}" for k in range(3, 11)]
    (principals / "bob").mkdir()
    (principals / "bob" / "memory.db").write_bytes(b"")
    assert claim_principal(principals, "bob") == (
        "bob",
        "Principal bob: it has a memory from an earlier run here, and the proxy starts from it.",
    )


def test_every_guard_has_words():
    from vicar.demo import GUARD_MEANING
    from vicar.proxy.calibration import GUARDS

    assert set(GUARDS) <= set(GUARD_MEANING) and all(GUARD_MEANING.values())


async def first_gate_details(address: str):
    from vicar.client.gates import gate_details
    from vicar.contracts import GATE_WORKFLOW
    from vicar.runtime.connect import connect
    from vicar.settings import Settings

    client = await connect(Settings.from_env(), target_host=address)
    async for w in client.list_workflows(f"WorkflowType = '{GATE_WORKFLOW}'"):
        if "-wait-" not in w.id:  # one of the session's gates, not one left for the person
            return await gate_details(client, w.id.removeprefix("vicar-gate/"))
    raise AssertionError("no gate listed")


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    pairs = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in pairs if pp == parent]
        found += kids
        todo += kids
    return found


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def approve_one_in_the_browser(base: str, link: str) -> tuple[list[str], list[str]]:
    """A person's first minute: the sign-in link in Chromium, the waiting gates, one
    approved with a tap. The questions listed before and after."""
    from playwright.sync_api import sync_playwright

    from .inbox_world import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(link)
            page.wait_for_url(f"{base}/")
            rows = page.locator("li.gate")
            rows.first.wait_for()
            before = [r.inner_text() for r in rows.all()]
            # The docs change with DROP TABLE in it: Vicar's default rule asked, so no one-tap
            # approve; the API change is approved with a tap.
            assert rows.filter(has_text="DROP TABLE users").locator("button.approve").count() == 0
            rows.filter(has_text="workspaces").locator("button.approve").click()
            # A tap on the list answers and comes back to the list, saying what it did: the
            # answer held for its undo window (the inbox sends it when the window closes).
            page.locator("form.held").wait_for()
            assert "approve" in page.locator("form.held").inner_text()
            page.locator("li.gate").first.wait_for()
            after = [r.inner_text() for r in page.locator("li.gate").all()]
        finally:
            browser.close()
    return before, after


def test_demo_keep_leads_to_the_inbox_and_ctrl_c_stops_everything(tmp_path, monkeypatch):
    """`vicar demo --keep` as a person runs it: the summary, then gates waiting for them,
    the inbox's address and their sign-in link; in a real Chromium they see the gates and
    approve one; the server, the worker and the UI are up meanwhile; Ctrl-C stops them all."""
    import signal
    import time
    import urllib.request

    from .inbox_world import _browser_or_skip

    _browser_or_skip()
    data_dir = tmp_path / "vicar"
    env = demo_env(data_dir)
    proc = subprocess.Popen(
        vicar_cmd("demo", "--gates", "2", "--human-delay", "0", "--keep"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
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
        out = "".join(lines)
        assert re.search(r"^2 gates in [\d.]+ s: ", out, re.M), out  # the session ran as without --keep
        assert re.search(r"^3 gates wait for you \(alice\)", out, re.M), out
        base = re.search(r"^Inbox: (http://127\.0\.0\.1:(\d+))/$", out, re.M)
        link = re.search(r"^Sign in as alice: (\S+/signin#token=\S+)$", out, re.M)
        assert base and link and link.group(1).startswith(base.group(1)), out
        assert out.count("#token=") == 1  # the link once
        children = children_of(proc.pid)
        assert children and temporal_servers_for(data_dir), "the server must still run"
        with urllib.request.urlopen(m.group(1), timeout=30) as page:  # the UI answers
            assert page.status == 200
        before, after = approve_one_in_the_browser(base.group(1), link.group(1))
        assert len(before) == 3 and len(after) == 2, (before, after)
        assert any("DROP TABLE users" in row and "docs-bot" in row for row in before), before
        assert any("DROP TABLE users" in row for row in after), after  # still waits: open to answer
        assert not any("workspaces" in row for row in after), after
        # The worker stays too: the approved gate completed, and its `details` query answers.
        address = re.search(r"Connected to embedded server at (\S+)\.", out).group(1)
        for name in [k for k in os.environ if k.startswith(("VICAR_", "TEMPORAL_"))]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("VICAR_DATA_DIR", str(data_dir))  # the demo's settings: its payload key
        details = asyncio.run(asyncio.wait_for(first_gate_details(address), timeout=30))
        assert details.principal == "alice" and details.status.value == "done", details
        approved = asyncio.run(asyncio.wait_for(approved_in_inbox(address), timeout=30))
        assert approved == ("approve", "human", "alice"), approved
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + rest
        assert "Traceback" not in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()
    for _ in range(50):  # every child goes with the demo: the server's keeper and the server
        if not temporal_servers_for(data_dir) and not any(os.path.exists(f"/proc/{c}") for c in children):
            break
        time.sleep(0.2)
    assert temporal_servers_for(data_dir) == []
    assert [c for c in children if os.path.exists(f"/proc/{c}")] == []
    assert port_free(int(base.group(2)))  # the inbox's port is free again


async def approved_in_inbox(address: str) -> tuple[str, str, str | None]:
    from vicar.contracts import GATE_WORKFLOW
    from vicar.runtime.connect import connect
    from vicar.settings import Settings

    client = await connect(Settings.from_env(), target_host=address)
    while True:  # the inbox holds an answer for its undo window (10 s), then sends it
        async for w in client.list_workflows(f"WorkflowType = '{GATE_WORKFLOW}' AND ExecutionStatus = 'Completed'"):
            if "-wait-" in w.id:
                r = await client.get_workflow_handle(w.id).result()
                return r["action"], r["answered_by"], r["responder"]
        await asyncio.sleep(0.5)


def test_demo_keep_on_a_busy_inbox_port_is_one_line_before_anything_starts(tmp_path):
    import socket

    from vicar.errors import Conflict

    data_dir = tmp_path / "vicar"
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        proc = subprocess.run(
            vicar_cmd("demo", "--keep", "--inbox-port", str(port)),
            capture_output=True,
            text=True,
            env=demo_env(data_dir),
            timeout=60,
            cwd=tmp_path,
        )
    assert proc.returncode == Conflict.exit_code and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use by another process: stop it or pass another --inbox-port"
    ]
    assert not (data_dir / "principals").exists()  # no principal claimed, no server started
    bare = subprocess.run(
        vicar_cmd("demo", "--inbox-port", str(port)), capture_output=True, text=True, env=demo_env(data_dir), timeout=60
    )
    assert bare.returncode == 2 and "add --keep" in bare.stderr, bare.stderr
