"""How often can any bound "cover" the realized error of the next 500 gates' answers
alone? (A benchmark of the metric, not of the rule.)

The replay's check coverage judges a bound on a rate against a share realized over as
few as 30 answers. This script takes the checks of real replays (the gate streams of
`vicar eval replay ... --variants default --out DIR`) and judges, at the same checks,
bounds that need no rule at all:

- the oracle rate: the reviewer's realized error alone over the whole history;
- the target (5%): what the rule states whenever it acts;
- the trivial bound 1.0: never wrong, never useful;

and, in a stationary world (the same answers alone, their errors redrawn as
Bernoulli at the oracle rate, 200 draws), the target and the true rate as bounds.

    python -m bench.coverage_noise /tmp/c-f0 /tmp/c-f1 /tmp/c-f2 /tmp/c-f3 /tmp/c-f4
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from vicar.eval.metrics import MAX_AUTONOMOUS_ERROR, MIN_STRETCH_ALONE, statement_coverage

DRAWS = 200


def reviewers(run: Path) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    with gzip.open(run / "gates-default.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            by.setdefault(row["reviewer"], []).append(row)
    return by


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="replay output folders holding gates-default.jsonl.gz")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| run | reviewer | alone | error alone | checks | oracle rate | target 5% | trivial 1.0 "
        "| stationary: target (mean, min) | stationary: true rate |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        for name, gates in reviewers(run).items():
            a = np.array([bool(g["autonomous"]) for g in gates])
            ok = np.array([bool(g["correct"]) for g in gates])
            if a.sum() < MIN_STRETCH_ALONE:
                continue
            rate = float(1 - ok[a].mean())

            def cover(bound: float, correct: np.ndarray = ok) -> tuple[float | None, int]:
                return statement_coverage([bound] * len(gates), list(a), list(correct))

            oracle, checks = cover(rate)
            target, trivial = cover(MAX_AUTONOMOUS_ERROR)[0], cover(1.0)[0]
            at_target: list[float] = []
            at_rate: list[float] = []
            for _ in range(DRAWS):
                redrawn = ok.copy()
                redrawn[a] = rng.random(int(a.sum())) >= rate
                covered = cover(MAX_AUTONOMOUS_ERROR, redrawn)[0], cover(rate, redrawn)[0]
                # The checks depend on which gates were answered alone, not on the answers: as many as above.
                assert covered[0] is not None and covered[1] is not None
                at_target.append(covered[0])
                at_rate.append(covered[1])
            print(
                f"| {run.name} | {name} | {int(a.sum())} | {rate:.3f} | {checks} | {oracle:.3f} | {target:.3f} "
                f"| {trivial:.3f} | {np.mean(at_target):.3f} ({np.min(at_target):.3f}) | {np.mean(at_rate):.3f} |"
            )


if __name__ == "__main__":
    main()
