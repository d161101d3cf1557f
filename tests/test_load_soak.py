"""The issue-24 load in small (bench/load_bench.py runs the 500-gate one by hand): 60
gates over 4 principals through a worker process that is SIGKILLed once mid-way, every
answer sent six times at once from three clients (updates and signals), the gates that
wait together answered together (many per principal at once). Every answer is
then in the store exactly once and in each side file exactly once, nothing is lost, and
the figures the bench reports exist.

Marked `soak`: `pytest` (and CI) runs it; `pytest -m "not soak"` skips it."""

from __future__ import annotations

import pytest

from bench.load_bench import markdown, run_load

# system explicitly: the processes are started in bench/load_bench.py, where the tiers do not look.
pytestmark = [pytest.mark.soak, pytest.mark.system]

GATES, PRINCIPALS, KILL_AT = 60, 4, 30


async def test_duplicate_answers_and_a_sigkill_leave_every_answer_once(tmp_path):
    report = await run_load(tmp_path, GATES, PRINCIPALS, [KILL_AT], duplicates=6, clients=3, in_flight=40, stall=240)
    print(markdown(report, f"tests/test_load_soak.py ({GATES} gates, {PRINCIPALS} principals)"))
    assert report.problems == []
    assert len(report.results) == GATES
    assert report.stored == report.lines == report.sections == GATES
    # The answers really raced: every gate got its duplicates, and one was taken.
    assert all(t.answered is not None and t.accepted <= 1 for t in report.timings.values())
    assert len(report.to_escalated) == len(report.to_result) == GATES
    assert len(report.rss_mb) == 2 and all(mb > 50 for mb in report.rss_mb)  # both worker runs were sampled


async def test_three_sigkills_leave_every_principal_usable(tmp_path):
    """Issue 34's goal in small: the worker SIGKILLed three times under load and restarted
    each time; then every principal is usable by the last worker (a probe gate each whose
    consult read the memory), it holds every principal's lock, no worker run refused a
    memory as in use (one worker at a time here: a refused lock was its own), and none
    reported a vector store unusable (none is damaged here: that was an interrupted open).

    What this asserts is the memory's part. Three kills also leave a few gates whose
    workflow task fails on replay ("Missing associated machine for LocalActivity", on main
    before this test too): printed with the report, and caught by the one-kill test."""
    gates, principals = 120, 8
    report = await run_load(
        tmp_path, gates, principals, [30, 60, 90], duplicates=2, clients=2, in_flight=40, stall=240, usable=True
    )
    print(markdown(report, f"tests/test_load_soak.py ({gates} gates, {principals} principals, 3 kills)"))
    assert report.usability is not None
    assert report.usability.problems == []
    assert report.usability.usable() == principals and report.usability.locks_held == principals
    assert report.refusals == [0, 0, 0, 0] and report.misreports == [0, 0, 0, 0]  # four runs' logs read
    assert [p for p in report.problems if "memory check" in p] == []  # every memory healthy
