"""Progress for long work (the replay, embedding a dataset): on a terminal a live bar
with rate and ETA, redrawn at least every 2 s; piped or in CI, a plain line per task at
least every 30 s and when it ends, so a log never goes silent for minutes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

REFRESH_PER_SECOND = 2  # the live bar: rate and ETA at least every 0.5 s
PLAIN_EVERY_SECONDS = 30.0  # a log line at least this often when not a terminal


def _eta(done: int, total: int | None, elapsed: float) -> str:
    if not total or not done or elapsed <= 0:
        return "?"
    left = (total - done) / (done / elapsed)
    minutes, seconds = divmod(int(left), 60)
    return f"{minutes}m{seconds:02d}s"


class PlainProgress:
    """The parts of rich's Progress the replay uses (add_task, advance), as log lines."""

    def __init__(self, console: Console, every: float = PLAIN_EVERY_SECONDS) -> None:
        self.console, self.every = console, every
        self._tasks: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> "PlainProgress":
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._ticker.join()

    def add_task(self, description: str, total: int | None = None) -> TaskID:
        with self._lock:
            self._tasks.append(
                {"description": description, "total": total, "done": 0, "start": time.monotonic(), "ended": False}
            )
            return TaskID(len(self._tasks) - 1)

    def advance(self, task: TaskID, advance: float = 1) -> None:
        with self._lock:
            t = self._tasks[task]
            t["done"] += advance
            if t["total"] is not None and t["done"] >= t["total"] and not t["ended"]:
                t["ended"] = True
                self._line(t)

    def _line(self, t: dict) -> None:
        elapsed = time.monotonic() - t["start"]
        done, total = int(t["done"]), t["total"]
        share = f" ({100 * done / total:.0f}%)" if total else ""
        rate = done / elapsed if elapsed > 0 else 0.0
        self.console.print(
            f"{t['description']}: {done}/{total if total is not None else '?'}{share}, "
            f"{rate:.1f}/s, {'done in ' + f'{elapsed:.0f}s' if t['ended'] else 'ETA ' + _eta(done, total, elapsed)}",
            markup=False,
            highlight=False,
        )

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                for t in self._tasks:
                    if not t["ended"]:
                        self._line(t)


@contextmanager
def progress(console: Console) -> Iterator[Progress | PlainProgress]:
    if console.is_terminal:
        with Progress(
            TextColumn("[bold]{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(show_speed=True),
            TimeRemainingColumn(),
            console=console,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=False,
        ) as bar:
            yield bar
    else:
        with PlainProgress(console) as lines:
            yield lines
