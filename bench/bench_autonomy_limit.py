"""How much of the hindsight ceiling can a rule with a valid "error <= 5%" statement reach?

Over a never-alone stream (every gate labelled; `vicar eval replay ... --variants
never-alone`), per reviewer and per 1,000-gate stretch:
- ceiling: the best threshold t* of the stretch in hindsight (error <= 5% at score >= t*),
  its gates n*, errors k*, and the fewest labelled answers a fixed-n Clopper-Pearson bound
  needs to state <= 5% at delta 0.05 with k* errors (59 with none).
- oracle: a rule told each stretch's thresholds in advance (best over the 0.005 grid and
  t*), which must still prove its threshold before answering alone: gates in the region
  are escalated (labelled) until the proof holds, then answered alone at 95% (5% audits).
  The proof is either Clopper-Pearson re-checked after every answer (`cp`: optimistic, it
  is not valid at every moment) or the shipped betting test (`bet`: valid). `strict`: only
  the stretch's own labels (the region moved); `carry`: every earlier gate at score >= t
  counts as labelled (optimistic: no rule has those labels). Alone gates must err <= 5%.
- fixed: the same oracle with one threshold for the whole history, against the fixed ceiling.

    python -m bench.bench_autonomy_limit /tmp/c-na0/gates-never-alone.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.retired_rules import required_answers
from vicar.proxy.autonomy.bets import GRID, betting_log_wealth

TARGET, DELTA, AUDIT, STRETCH = 0.05, 0.05, 0.05, 1000
REQ = required_answers(TARGET, DELTA, 20_000)
NEED = math.log(1.0 / DELTA)
KEYS = ("cp-strict", "bet-strict", "cp-carry", "bet-carry", "bet-best", "any-best")
_CARRY: dict[tuple[float, str], np.ndarray] = {}


def best_threshold(s: np.ndarray, ok: np.ndarray, provable: bool = False) -> tuple[float | None, int, int]:
    """(t*, gates at score >= t*, errors among them): the largest region with error <= 5%
    (provable: the largest whose own labels, all of them, prove <= 5% by Clopper-Pearson)."""
    keep = ~np.isnan(s)
    s, ok = s[keep], ok[keep]
    if not len(s):
        return None, 0, 0
    order = np.argsort(-s, kind="stable")
    s, ok = s[order], ok[order]
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    n, k = ends + 1, np.cumsum(~ok)[ends]
    good = np.flatnonzero(n >= REQ[k] if provable else k <= TARGET * n + 1e-9)
    if not len(good):
        return None, 0, 0
    j = good[np.argmax(n[good])]
    return float(s[ends[j]]), int(n[j]), int(k[j])


def proven(err: np.ndarray, how: str) -> np.ndarray:
    """Per region gate, in order: is the proof in force before it (labels of all earlier)."""
    if not len(err):
        return np.zeros(0, dtype=bool)
    if how == "cp":
        n, k = np.arange(1, len(err) + 1), np.cumsum(err)
        after = n >= REQ[np.minimum(k, len(REQ) - 1)]
    else:
        after = betting_log_wealth(err.astype(float), TARGET) >= NEED
    return np.concatenate([[False], after[:-1]])


def oracle_alone(s: np.ndarray, ok: np.ndarray, lo: int, hi: int, t: float, how: str, carry: bool) -> float:
    """Expected answers alone in [lo, hi) at threshold t, or 0 if they would err > 5%."""
    start = 0 if carry else lo
    m = np.nan_to_num(s[start:hi], nan=-1.0) >= t
    idx = np.flatnonzero(m) + start
    err = ~ok[idx]
    if carry:  # the whole history's proof at t, computed once per reviewer
        if (t, how) not in _CARRY:
            _CARRY[(t, how)] = proven(err if hi == len(s) else ~ok[np.nan_to_num(s, nan=-1.0) >= t], how)
        p = _CARRY[(t, how)][: len(idx)]
    else:
        p = proven(err, how)
    if not carry:
        p = p & np.maximum.accumulate(p)  # strict: once proven within the stretch, it stays
    take = p & (idx >= lo)
    if not take.any() or err[take].mean() > TARGET + 1e-12:
        return 0.0
    return (1 - AUDIT) * take.sum()


def candidates(s: np.ndarray, extra: float | None) -> list[float]:
    ts = [float(g) for g in GRID if g <= np.nanmax(s)] if np.isfinite(s).any() else []
    return ts + ([extra] if extra is not None else [])


def reviewer(s: np.ndarray, ok: np.ndarray) -> dict:
    n = len(s)
    _CARRY.clear()
    out: dict = {"gates": n, "stretches": []}
    for lo in range(0, n, STRETCH):
        hi = min(lo + STRETCH, n)
        t, nr, kr = best_threshold(s[lo:hi], ok[lo:hi])
        row: dict[str, Any] = dict(lo=lo, size=hi - lo, t=t, n=nr, k=kr, need=int(REQ[kr]) if t is not None else None)
        row["provable"] = best_threshold(s[lo:hi], ok[lo:hi], provable=True)[1]
        cand = candidates(s[lo:hi], t)
        for how in ("cp", "bet"):
            for carry in (False, True):
                key = f"{how}-{'carry' if carry else 'strict'}"
                row[key] = max((oracle_alone(s, ok, lo, hi, c, how, carry) for c in cand), default=0.0)
        row["bet-best"] = max(row["bet-strict"], row["bet-carry"])
        row["any-best"] = max(row[k] for k in KEYS[:4])
        out["stretches"].append(row)
    # one threshold over the whole history: the fixed ceiling and its oracle
    t, nr, _ = best_threshold(s, ok)
    out["fixed_ceiling"] = nr
    cand = candidates(s, t)
    for how in ("cp", "bet"):
        out[f"fixed-{how}"] = max((oracle_alone(s, ok, 0, n, c, how, True) for c in cand), default=0.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gates", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    by: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(args.gates, "rt") as fh:
        for line in fh:
            g = json.loads(line)
            by[g["reviewer"]].append(g)
    res = {}
    keys = KEYS
    tot: dict[str, float] = defaultdict(float)
    for name, gs in by.items():
        gs.sort(key=lambda g: g["order"])
        s = np.array([np.nan if g["score"] is None else g["score"] for g in gs], dtype=float)
        ok = np.array([bool(g["correct"]) for g in gs])
        r = res[name] = reviewer(s, ok)
        print(f"\n## {name}: {r['gates']} gates")
        print(
            "| stretch | t* | n* (ceiling gates) | k* | err* | CP needs (k*) | n* >= need | provable | "
            + " | ".join(keys)
            + " |"
        )
        print("|---|---|---|---|---|---|---|---|" + "---|" * len(keys))
        for x in r["stretches"]:
            err = x["k"] / x["n"] if x["n"] else float("nan")
            t = "—" if x["t"] is None else f"{x['t']:.3f}"
            cells = " | ".join(f"{x[k]:.0f}" for k in keys)
            print(
                f"| {x['lo']} | {t} | {x['n']} | {x['k']} | {err:.3f} | {x['need']} | "
                f"{'yes' if x['need'] is not None and x['n'] >= x['need'] else 'no'} | {x['provable']} | {cells} |"
            )
        ceil = sum(x["n"] for x in r["stretches"])
        prov = sum(x["provable"] for x in r["stretches"])
        tot["provable"] += prov
        sums = {k: sum(x[k] for x in r["stretches"]) for k in keys}
        tot["gates"] += r["gates"]
        tot["ceiling"] += ceil
        tot["fixed_ceiling"] += r["fixed_ceiling"]
        for k in (*keys, "fixed-cp", "fixed-bet"):
            tot[k] += sums.get(k, r.get(k, 0.0))
        share = ", ".join(
            f"{k} {sums[k] / r['gates']:.3f} ({sums[k] / ceil if ceil else 0:.2f} of ceiling)" for k in keys
        )
        print(
            f"\nceiling per stretch {ceil / r['gates']:.3f} ({ceil} gates); provable ceiling per stretch "
            f"{prov / r['gates']:.3f} ({prov} gates); {share}; "
            f"fixed ceiling {r['fixed_ceiling'] / r['gates']:.3f}; fixed oracle cp "
            f"{r['fixed-cp'] / r['gates']:.3f}, bet {r['fixed-bet'] / r['gates']:.3f}"
        )
    g = tot["gates"]
    print(
        f"\n## pooled: {g:.0f} gates; ceiling per stretch {tot['ceiling'] / g:.3f}; "
        f"provable {tot['provable'] / g:.3f}; "
        + ", ".join(f"{k} {tot[k] / g:.3f} ({tot[k] / tot['ceiling']:.2f} of ceiling)" for k in keys)
        + f"; fixed ceiling {tot['fixed_ceiling'] / g:.3f}; fixed oracle cp {tot['fixed-cp'] / g:.3f}, "
        f"bet {tot['fixed-bet'] / g:.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
