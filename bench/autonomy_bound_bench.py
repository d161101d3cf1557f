"""Compare autonomy rules over one recorded stream of gates (a benchmark, not a test).

The stream: `gates-never-alone.jsonl.gz` from `vicar eval replay ... --variants
never-alone --out DIR` (every gate went to the human, so every gate has a label).
The predictor's scores hardly depend on the rule, so a rule can be simulated over it:
for each reviewer's gates in order, the rule in force (from the pairs so far) decides
alone / escalate / audit; only escalated and audited gates add pairs; an audit is a
random draw (the seed). Every candidate sees the same draws for the same seed.

    python -m bench.autonomy_bound_bench DIR/gates-never-alone.jsonl.gz --seeds 0 1 2 3 4

Candidates (all at target 5%, delta 0.05, 5% audits, the drift test on):
- today:       Clopper-Pearson over the latest 2,000 pairs, the lowest passing threshold,
               re-checked after every pair (the rule before this change).
- ltt:         the same bound, fixed-sequence search (from the top down, stop at the first failure).
- ltt-spend:   ltt re-checked only at geometric pair counts (59 * 1.25^j) at delta_j = delta/((j+1)(j+2)).
- betting:     the betting test per grid threshold over all pairs, fixed-sequence.
- betting-ipw: betting, audits weighted 1/q and unaudited autonomous gates entered as
               unlabelled (error 0, weight 1/q): the evidence of all gates above the threshold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.retired_rules import PairWindow, check_index, required_answers, search, spent_delta
from vicar.eval import metrics as m
from vicar.proxy.autonomy.bets import BettingLedger, DriftTest

TARGET, DELTA, AUDIT, WINDOW = 0.05, 0.05, 0.05, 2000
STARTS: tuple[float, ...] = (1.0,)  # --starts: the fixed sequences' tops (Bonferroni over them)
CANDIDATES = ("today", "ltt", "ltt-spend", "betting", "betting-ipw")


def lowest_passing(window: PairWindow) -> float | None:
    """Today's search: the lowest threshold whose bound passes, anywhere."""
    s, wrong = -window._neg, window._wrong
    if not len(s):
        return None
    errors = np.cumsum(wrong)
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    n, k = ends + 1, errors[ends]
    proven = n >= required_answers(TARGET, DELTA, WINDOW)[k]
    return float(s[ends[np.flatnonzero(proven)[-1]]]) if proven.any() else None


class Rule:
    """One candidate's state for one reviewer (or one withdrawn context)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.window = PairWindow(WINDOW)
        self.ledger = BettingLedger(TARGET, DELTA)
        self.pairs = 0
        self.check: int | None = None
        self.held: tuple[float | None, float] = (None, 1.0)

    def add(self, seq: int, score: float, correct: bool, weight: float) -> None:
        if self.kind.startswith("betting"):
            w = weight if self.kind == "betting-ipw" else 1.0
            self.ledger.add(score, not correct, w)
        else:
            self.window.extend([(seq, score, correct)])
        if weight == 1.0 or self.kind == "betting-ipw" or correct is not None:
            self.pairs += 1

    def add_unlabelled(self, score: float) -> None:
        if self.kind == "betting-ipw":
            self.ledger.add(score, False, 1.0 / AUDIT)

    def state(self) -> tuple[float | None, float]:
        """(threshold, the bound stated with it)."""
        if self.kind == "today":
            t = lowest_passing(self.window)
            return t, TARGET
        if self.kind == "ltt":
            r = self.window.rule(TARGET, DELTA, AUDIT, STARTS)
            return r.threshold, r.bound
        if self.kind == "ltt-spend":
            j = check_index(self.pairs, 59, 1.25)
            if j is not None and j != self.check:
                self.check = j
                r = search(
                    -self.window._neg,
                    self.window._wrong,
                    TARGET,
                    spent_delta(DELTA, j),
                    AUDIT,
                    most=WINDOW,
                    starts=STARTS,
                )
                self.held = (r.threshold, r.bound)
            return self.held
        i = self.ledger.threshold(STARTS)
        return (None, 1.0) if i is None else (float(self.ledger.lowest[i]), TARGET)


def simulate(gates: list[dict], kind: str, seed: int, drift: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    pooled = Rule(kind)
    tests: dict[tuple, DriftTest] = {}
    withdrawn: dict[tuple, Rule] = {}  # context -> the rule re-earning it
    alone, audited, correct, stated, withdrawals = [], [], [], [], 0
    for i, g in enumerate(gates):
        ctx = (g["state"], g["task_type"])
        score, ok = g["score"], g["correct"]
        thr, bound = pooled.state()
        if ctx in withdrawn:
            thr, bound = None, 1.0
        stated.append(bound if thr is not None else None)
        above = thr is not None and score is not None and score >= thr and score > 0
        draw = rng.random()  # drawn for every gate: the same draws for every candidate
        a = above and draw >= AUDIT
        au = above and not a
        alone.append(a)
        audited.append(au)
        correct.append(ok)
        if score is None:
            continue  # no prediction: no pair (the product stores none either)
        if a:
            pooled.add_unlabelled(score)
            continue
        weight = 1.0 / AUDIT if au else 1.0
        pooled.add(i, score, ok, weight)
        if ctx in withdrawn:
            local = withdrawn[ctx]
            local.add(i, score, ok, 1.0)
            if local.state()[0] is not None and score >= local.state()[0]:
                del withdrawn[ctx]  # re-earned by the same rule, on the context's own pairs
                tests[ctx] = DriftTest(TARGET, DELTA)
        elif au and drift:
            test = tests.setdefault(ctx, DriftTest(TARGET, DELTA))
            if test.add(not ok):
                withdrawn[ctx] = Rule(kind)
                withdrawals += 1
    return dict(alone=alone, audited=audited, correct=correct, stated=stated, withdrawals=withdrawals)


def summarize(gates: list[dict], sim: dict) -> dict:
    a, ok = np.array(sim["alone"]), np.array(sim["correct"])
    n = len(a)
    per, fixed = m.hindsight_ceiling([g["score"] for g in gates], list(ok))
    stretches = m.stretch_errors(a.tolist(), ok.tolist())
    cov, checks = m.statement_coverage(sim["stated"], a.tolist(), ok.tolist())
    cov_t, _ = m.statement_coverage([None if b is None else TARGET for b in sim["stated"]], a.tolist(), ok.tolist())
    escalated = n - a.sum() - np.sum(sim["audited"])
    return dict(
        gates=n,
        alone=a.mean(),
        error=float(1 - ok[a].mean()) if a.any() else None,
        worst_stretch=max((e for _, _, e in stretches), default=None),
        stretches=len(stretches),
        over=sum(e > 0.075 for _, _, e in stretches),
        coverage=cov,
        coverage_target=cov_t,
        checks=checks,
        ceiling=per,
        fixed=fixed,
        of_ceiling=a.mean() / per if per else None,
        load=(escalated + np.sum(sim["audited"])) / n,
        withdrawals=sim["withdrawals"],
    )


def ece(gates: list[dict]) -> float:
    preds = [
        m.Prediction(
            seq=0, actual="a", predicted="a" if g["correct"] else "b", confidence=g["score"] or 0.0, autonomous=False
        )
        for g in gates
    ]
    return m.ece(preds)


def f(x, d=3):
    return "—" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gates", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    ap.add_argument("--no-drift", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--starts", type=float, nargs="+", default=[1.0])
    args = ap.parse_args()
    global STARTS
    STARTS = tuple(args.starts)
    by: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(args.gates, "rt") as fh:
        for line in fh:
            g = json.loads(line)
            by[g["reviewer"]].append(g)
    for gs in by.values():
        gs.sort(key=lambda g: g["order"])
    rows = []
    for kind in args.candidates:
        for seed in args.seeds:
            start = time.perf_counter()
            for reviewer, gs in by.items():
                s = summarize(gs, simulate(gs, kind, seed, drift=not args.no_drift))
                rows.append(dict(candidate=kind, seed=seed, reviewer=reviewer, **s))
            print(f"# {kind} seed {seed}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    cols = [
        "alone",
        "error",
        "worst_stretch",
        "over",
        "stretches",
        "coverage",
        "coverage_target",
        "checks",
        "ceiling",
        "fixed",
        "of_ceiling",
        "load",
        "withdrawals",
    ]
    print("| candidate | reviewer | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for kind in args.candidates:
        for reviewer in by:
            rs = [r for r in rows if r["candidate"] == kind and r["reviewer"] == reviewer]
            cells = []
            for c in cols:
                vals = [r[c] for r in rs if r[c] is not None]
                if not vals:
                    cells.append("—")
                elif c in ("over", "stretches", "checks", "withdrawals"):
                    cells.append(f"{np.mean(vals):.1f}" + (f" (max {max(vals)})" if c == "over" else ""))
                elif c in ("error", "worst_stretch"):
                    cells.append(f"{np.mean(vals):.3f} (max {max(vals):.3f})")
                elif c.startswith("coverage"):
                    cells.append(f"{np.mean(vals):.3f} (min {min(vals):.3f})")
                else:
                    cells.append(f"{np.mean(vals):.3f}")
            print(f"| {kind} | {reviewer} | " + " | ".join(cells) + " |")
    print(
        "\nECE of the scores per reviewer: "
        + ", ".join(f"{r}: {ece(gs):.3f} ({len(gs)} gates)" for r, gs in by.items())
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
