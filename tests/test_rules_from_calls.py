"""`vicar rules test` with a coding agent's call (a command line, or a hook input as Claude
Code or Codex sends it): the gate as the hook opens it, and the rule it would hit, read
from the principal's brain on a real worker by a second process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from vicar.client import add_rule

from .conftest import vicar_process

FIXTURES = Path(__file__).parent / "fixtures"


async def test_rules_test_takes_a_command_line_or_a_hook_input(harness, tmp_path):
    h = harness
    p = h.principal()
    await add_rule(
        h.client,
        p,
        dict(name="no-touching", effect="ask", lineages=["bash:touch"]),
        by="alice",
        task_queue=h.task_queue,
    )
    await add_rule(
        h.client,
        p,
        dict(name="tests-run", effect="approve", task_types=["bash"]),
        by="alice",
        **{"task_queue": h.task_queue},
    )
    elsewhere = tmp_path / "elsewhere"
    code, out, err = await vicar_process(h, elsewhere, "rules", "test", p, "--command", "touch /tmp/x/ran-marker")
    assert code == 0, err
    assert "task type bash, lineage bash:touch, agent claude-code" in out
    assert "asks the human: rule no-touching (ask, by alice)" in out
    code, out, err = await vicar_process(h, elsewhere, "rules", "test", p, "--command", "npm test", "-o", "json")
    assert code == 0 and json.loads(out)["rule"]["name"] == "tests-run", err
    # A hook input, as Codex sent it (its agent named), from a file and from stdin.
    hook_input = FIXTURES / "codex" / "captured_0.171.0_pre_tool_use_bash.json"
    argv = ["rules", "test", p, "--hook-input", str(hook_input), "--agent", "codex"]
    code, out, err = await vicar_process(h, elsewhere, *argv)
    assert code == 0 and "lineage bash:touch, agent codex" in out and "rule no-touching" in out, err
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": h.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": h.task_queue,
        "VICAR_DATA_DIR": str(elsewhere),
    }
    claude = (FIXTURES / "claude_code" / "pre_tool_use_edit.json").read_bytes()
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "vicar.cli", "rules", "test", p, "--hook-input", "-"],
        input=claude,
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0 and b"task type edit, lineage edit:*.py" in done.stdout, done.stderr
    assert b"no rule or pause applies" in done.stdout
    # Bad input is one line, the usual exit code.
    code, out, err = await vicar_process(h, elsewhere, "rules", "test", p, "--hook-input", str(tmp_path / "none"))
    assert code == 2 and err.count("\n") == 1 and "cannot read" in err
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "vicar.cli", "rules", "test", p, "--hook-input", "-"],
        input=b'{"hook_event_name": "PreToolUse"}',
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2 and b"tool_name" in done.stderr and done.stderr.count(b"\n") == 1
