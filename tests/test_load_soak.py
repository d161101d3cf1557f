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

pytestmark = pytest.mark.soak

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
