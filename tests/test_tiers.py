"""The tiers (tests/tiers.py): a few known tests land in the tier they belong to, so the
automatic assignment cannot drift unseen, and a run goes fast-first and stops after a
failed tier, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import tiers
from .conftest import vicar_process

ROOT = Path(__file__).resolve().parents[1]

KNOWN = {
    # pure computation
    "unit": [
        "tests/test_activation.py::test_exact_matches_reference",
        "tests/test_tiers.py::test_a_test_only_some_helper_reaches_spawning_from_is_system",  # explicit marker
    ],
    # the harness (an in-process worker against the Temporal dev server)
    "workflow": ["tests/test_gate.py::test_gate_escalates_and_completes_on_answer"],
    "system": [
        "tests/test_worker.py::test_worker_process_serves_gates_and_stops_on_sigterm",  # worker process
        "tests/test_human_control.py::test_rules_and_pauses_outlive_a_terminated_brain",  # CLI via vicar_process
        "tests/test_inbox.py::test_sign_in_read_the_gate_and_approve_it",  # the browser
        "tests/test_demo.py::test_demo_explains_itself_and_leaves_no_server",  # the demo
        "tests/test_load_soak.py::test_duplicate_answers_and_a_sigkill_leave_every_answer_once",  # explicit marker
    ],
}


def collected(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("tier", sorted(KNOWN))
def test_known_tests_are_in_their_tier(tier: str):
    files = sorted({node.split("::")[0] for nodes in KNOWN.values() for node in nodes})
    run = collected("--collect-only", "-q", "-m", tier, *files)
    assert run.returncode == 0, run.stdout + run.stderr
    listed = {line.strip() for line in run.stdout.splitlines() if "::" in line}
    for other, nodes in KNOWN.items():
        for node in nodes:
            assert (node in listed) == (other == tier), f"{node} expected in {other}, `-m {tier}` says otherwise"


def _runs_the_cli():
    return vicar_process


@pytest.mark.unit  # an explicit marker wins: it names vicar_process but never calls it
def test_a_test_only_some_helper_reaches_spawning_from_is_system():
    """The guess follows what a test names in tests/: here vicar_process, which starts the CLI."""
    assert "create_subprocess_exec" in tiers.names_used([_runs_the_cli])
    assert "create_subprocess_exec" not in tiers.names_used([tiers.tier_of])


RUN = """
import pytest

def test_unit_fails():
    assert False

def test_unit_passes():
    pass

def test_workflow(temporal_env):
    pass

def test_system():
    import subprocess
    subprocess.run(["true"])

@pytest.mark.soak
def test_soak():
    pass
"""

CONFTEST = """
import pytest
from tests.tiers import (
    pytest_addoption, pytest_collection_modifyitems, pytest_configure,
    pytest_runtest_makereport, pytest_runtest_protocol, pytest_terminal_summary,
)

@pytest.fixture
def temporal_env():
    return None
"""


def test_the_run_goes_fast_first_and_stops_after_a_failed_tier(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    # Written slowest first: the run reorders them.
    (tmp_path / "test_run.py").write_text(RUN)
    run = collected("-v", "-p", "no:asyncio", str(tmp_path), cwd=tmp_path)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "test_unit_fails FAILED" in out and "test_unit_passes PASSED" in out
    assert "::test_workflow" not in out and "::test_system" not in out and "::test_soak" not in out
    assert "tier 'unit' failed (1 tests): stopped before workflow, system, soak" in out
    assert "stopped the run here" in out

    everything = collected("-v", "-p", "no:asyncio", "--all-tiers", str(tmp_path), cwd=tmp_path)
    out = everything.stdout
    assert everything.returncode == 1, out + everything.stderr
    order = [name for name in ("test_unit_passes", "test_workflow", "test_system", "test_soak") if name in out]
    assert order == ["test_unit_passes", "test_workflow", "test_system", "test_soak"]
    positions = [out.index(f"{name} PASSED") for name in order]
    assert positions == sorted(positions)
    assert "stopped" not in out
