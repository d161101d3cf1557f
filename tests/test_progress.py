"""Long work shows progress: piped, a plain line at least every PLAIN_EVERY_SECONDS and at
the end; on a terminal, rich's live bar with rate and ETA."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console
from rich.progress import Progress

from vicar.progress import PlainProgress, progress


def test_piped_progress_prints_plain_lines_on_a_clock_and_at_the_end():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with PlainProgress(console, every=0.2) as bar:
        task = bar.add_task("embedding the dataset", total=10)
        for _ in range(5):
            bar.advance(task, 1)
            time.sleep(0.15)  # slower than the clock: lines come between the steps
        time.sleep(0.5)
        bar.advance(task, 5)
    lines = out.getvalue().splitlines()
    ticking = [line for line in lines if "ETA" in line]
    assert len(ticking) >= 3, lines
    assert re.fullmatch(r"embedding the dataset: 5/10 \(50%\), [\d.]+/s, ETA \d+m\d\ds", ticking[-1]), ticking
    assert re.fullmatch(r"embedding the dataset: 10/10 \(100%\), [\d.]+/s, done in \d+s", lines[-1]), lines


def test_progress_picks_the_live_bar_on_a_terminal_and_lines_otherwise():
    with progress(Console(file=io.StringIO(), force_terminal=True)) as live:
        assert isinstance(live, Progress)
    with progress(Console(file=io.StringIO(), force_terminal=False)) as plain:
        assert isinstance(plain, PlainProgress)
