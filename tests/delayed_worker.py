"""A real worker process that pauses where a test kills it: before each piece of a
memory move is written (--piece-delay) or after each consolidation decision is applied
(--step-delay). The pauses wrap the product's own functions here, so the product carries
no test switch.

    python -m tests.delayed_worker --piece-delay 5      # the worker's environment as usual
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from vicar import worker
from vicar.activities import consolidation as consolidation_activities
from vicar.memory import transfer


def pause_pieces(seconds: float) -> None:
    write_piece = transfer.write_piece

    def slow(staging: Path, index: int, data: bytes) -> None:
        staging.mkdir(parents=True, exist_ok=True)  # the test sees the step has begun
        time.sleep(seconds)
        write_piece(staging, index, data)

    transfer.write_piece = slow


def pause_steps(seconds: float) -> None:
    apply = consolidation_activities.apply_consolidation

    def slow(memory, plan, on_step=None):
        def step(i: int) -> None:
            if on_step:
                on_step(i)  # the activity's heartbeat
            time.sleep(seconds)

        return apply(memory, plan, on_step=step)

    consolidation_activities.apply_consolidation = slow


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--piece-delay", type=float, default=0.0, help="seconds before each piece is written")
    ap.add_argument("--step-delay", type=float, default=0.0, help="seconds after each consolidation decision")
    args = ap.parse_args()
    if args.piece_delay:
        pause_pieces(args.piece_delay)
    if args.step_delay:
        pause_steps(args.step_delay)
    worker.main()


if __name__ == "__main__":
    main()
