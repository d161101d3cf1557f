"""The shipped autonomy rule over a recorded stream: any candidate score turned into
"share alone, realized error, worst 1,000-gate stretch", per reviewer.

The rule is the product's own objects, called as the product calls them:
`vicar.proxy.sequential.BettingLedger` (one bet per grid threshold, the four fixed
sequences STARTS, `rule(audit_share)` for the threshold) fed as
`vicar.proxy.withdrawal.PairLedger.update` feeds it (a gate the human answered: weight
1; an audit: weight 1/q; an answer alone not audited: error 0, weight 1/q, unlabelled),
and `vicar.proxy.withdrawal.DriftBook` (`label` for an audit, `pair` for any other
labelled gate) withdrawing a context. Per gate: the rule in force from the pairs so
far; score >= threshold (and > 0) and not withdrawn: alone unless the audit draw
(a seeded RNG here, a hash of the gate in the product) falls under q.

Candidates the issue names, each as a subclass or a flag (never a change to the shipped objects):
- `stake=labelled`: the bets' stakes sized on the labelled pairs' plain error
  (a predictable stake, so the wealth stays a nonnegative supermartingale under H0),
  the wealth still over the inverse-probability-weighted observations;
- `active`: audit probability q = audit * (1 - score) / mean(1 - score of the gates
  so far), within [qmin, 1]; the weight 1/q is known when the draw is made;
- `rerank(gain)`: the scores re-ranked within each 1,000-gate block (same values)
  so that the reviewer's AUROC rises by `gain`.

What this leaves out: the memory guards, probation and the trust floor (the replay's
"alone" also passes those), regrets, and the feedback of the rule on the predictor
(an answer alone is not learned from: the recorded scores came from the default's
own decisions).

    python -m bench.score.simulate --seeds 0 1 2 3 4                  # the issue's claims
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from bench.score.common import DEFAULT_GATES, gate_key, load_events, load_gates
from bench.score.measure import auroc
from vicar.eval import metrics as m
from vicar.proxy import sequential as seq
from vicar.proxy.sequential import STARTS, BettingLedger
from vicar.proxy.withdrawal import DriftBook

STATE = "WORK_ASSERT"


@dataclass(frozen=True)
class Config:
    target: float = 0.05
    delta: float = 0.05
    audit: float = 0.05
    weighting: str = "ipw"  # or "labelled": the labelled pairs alone, weight 1 (VICAR_AUTONOMY_WEIGHTING)
    stake: str = "ipw"  # or "labelled": the stakes' plug-in estimate from the labelled pairs only
    active: bool = False
    qmin: float = 0.01
    drift: bool = True
    starts: tuple[float, ...] = STARTS


class LabelledStakeLedger(BettingLedger):
    """The shipped ledger with one change: each bet's stake is Kelly's at an estimate of
    the error over the labelled observations only (unweighted), not over the weighted
    ones, where one wrong audit (z = 20) pins the estimate above target for about a
    half-life (RECENT) and the stake at 0. The wealth's factors are the shipped ones."""

    def __init__(self, target: float, delta: float) -> None:
        super().__init__(target, delta)
        self._sl = self._s.copy()
        self._wl = self._w.copy()

    def add(self, score: float, error: bool, weight: float = 1.0, labelled: bool = True) -> None:
        t = self.target
        mask = self.grid <= score
        if not mask.any():
            return
        zmax = max(weight, 1.0)
        z = weight * float(error)
        p = self._sl[mask] / self._wl[mask]
        stake = np.clip(seq.KELLY * (t - p) / (t * (zmax - t)), 0.0, seq.STAKE_CAP / (zmax - t))
        self.log_wealth[mask] += np.log1p(stake * (t - z))
        lv = self.levels[None, :]
        lstake = np.clip(seq.KELLY * (lv - p[:, None]) / (lv * (zmax - lv)), 0.0, seq.STAKE_CAP / (zmax - lv))
        self.level_wealth[mask] += np.log1p(lstake * (lv - z))
        p0 = self._s0[mask] / self._w[mask]
        stake0 = np.clip(seq.KELLY * (t - p0) / (t * (zmax - t)), 0.0, seq.STAKE_CAP / (zmax - t))
        self.spotless[mask] += np.log1p(stake0 * t)
        self._s0[mask] = self._decay * self._s0[mask]
        self.wrong[mask] += int(error and weight > 0)
        self.lowest[mask] = np.minimum(self.lowest[mask], score)
        self._s[mask] = self._decay * self._s[mask] + z
        self._w[mask] = self._decay * self._w[mask] + 1.0
        if labelled:
            self._sl[mask] = self._decay * self._sl[mask] + float(error)
            self._wl[mask] = self._decay * self._wl[mask] + 1.0
        self.count[mask] += 1
        self.labelled[mask] += int(labelled)
        self.errors[mask] += z


class Scores(Protocol):
    """A score per gate, online: `score(i)` before gate i's label is known; then
    `observe(i, labelled)` (labelled False: an answer alone, not audited: its label is
    never seen)."""

    def score(self, i: int) -> float: ...

    def observe(self, i: int, labelled: bool) -> None: ...


class Fixed:
    """A recorded stream of scores (NaN: no prediction)."""

    def __init__(self, scores) -> None:
        self.s = np.asarray(scores, float)

    def score(self, i: int) -> float:
        return float(self.s[i])

    def observe(self, i: int, labelled: bool) -> None:
        pass


def audit_draws(n: int, seed: int, gate_ids=None, reviewer: str = "") -> np.ndarray:
    """One uniform draw per gate: the product's (`audit_draw`, a hash of the principal and
    the gate, the principal named as the replay names it for this seed) when the gate ids
    are known (the replay's, common.gate_key), else a seeded RNG's."""
    if gate_ids is None:
        return np.random.default_rng(seed).random(n)
    from vicar.eval.dataset import principal_for
    from vicar.proxy.autonomy import audit_draw

    principal = principal_for(reviewer, seed)
    return np.array([audit_draw(principal, g) for g in gate_ids])


def simulate(scores: Scores, right, tasks, seed: int, cfg: Config = Config(), draws=None) -> dict:
    right = np.asarray(right, bool)
    n = len(right)
    draws = audit_draws(n, seed) if draws is None else draws
    ledger = (
        LabelledStakeLedger(cfg.target, cfg.delta) if cfg.stake == "labelled" else BettingLedger(cfg.target, cfg.delta)
    )
    book = DriftBook(cfg.target, cfg.delta)
    rule = None
    alone = np.zeros(n, bool)
    audited = np.zeros(n, bool)
    stated = np.full(n, np.nan)
    s_used = np.full(n, np.nan)
    uncert_sum, uncert_n = 0.0, 0
    withdrawals = 0
    for i in range(n):
        ctx = (STATE, str(tasks[i]))
        s = scores.score(i)
        s_used[i] = s
        if rule is None:
            rule = ledger.rule(cfg.audit, cfg.starts)
        thr = rule.threshold
        if cfg.drift and ctx in book.withdrawn:
            thr = None
        if thr is not None:
            stated[i] = thr
        draw = draws[i]  # one draw per gate: every candidate sees the same draws
        has = not math.isnan(s)
        q = cfg.audit
        if cfg.active and has:
            mean = uncert_sum / uncert_n if uncert_n else 1 - s
            q = min(1.0, max(cfg.qmin, cfg.audit * (1 - s) / max(mean, 1e-6)))
        if has:
            uncert_sum += 1 - s
            uncert_n += 1
        above = thr is not None and has and s > 0 and s >= thr
        if above and draw >= q:
            alone[i] = True
            if cfg.weighting == "ipw":
                ledger.add(s, False, 1.0 / q, labelled=False)
                rule = None
            scores.observe(i, False)
            continue
        scores.observe(i, True)
        if not has:
            continue  # no prediction: no pair
        audited[i] = above
        weight = 1.0 / q if (above and cfg.weighting == "ipw") else 1.0
        ledger.add(s, not right[i], weight)
        rule = None
        if cfg.drift:
            was = ctx in book.withdrawn
            if above:
                book.label(ctx, i, not right[i])
                withdrawals += (not was) and ctx in book.withdrawn
            else:
                book.pair(ctx, s, bool(right[i]))
    return dict(alone=alone, audited=audited, stated=stated, scores=s_used, withdrawals=withdrawals)


def summarize(sim: dict, right) -> dict:
    a, ok = sim["alone"], np.asarray(right, bool)
    stretches = m.stretch_errors(a, ok)
    return dict(
        gates=len(a),
        alone=int(a.sum()),
        wrong=int((a & ~ok).sum()),
        audits=int(sim["audited"].sum()),
        share=float(a.mean()),
        error=float(1 - ok[a].mean()) if a.any() else None,
        worst=max((e for _, _, e in stretches), default=None),
        stretches=len(stretches),
        over=sum(e > m.STRETCH_LIMIT for _, _, e in stretches),
        withdrawals=sim["withdrawals"],
    )


def rerank(scores, right, gain: float, block: int = 1000, seed: int = 0) -> np.ndarray:
    """The same score values within each `block` gates, reassigned so that the stream's
    AUROC rises by about `gain`: gates are ordered by their score's rank in the block
    (ties broken at random) plus lambda for a right one, and take the block's sorted
    values in that order; lambda by bisection on the whole stream's AUROC."""
    s = np.asarray(scores, float)
    y = np.asarray(right, bool)
    rng = np.random.default_rng(seed)
    jitter = rng.random(len(s))
    goal = (auroc(s, y) or 0.5) + gain

    def apply(lam: float) -> np.ndarray:
        out = s.copy()
        for b in range(0, len(s), block):
            idx = np.arange(b, min(b + block, len(s)))
            idx = idx[~np.isnan(s[idx])]
            if len(idx) < 2:
                continue
            order = np.lexsort((jitter[idx], s[idx]))
            u = np.empty(len(idx))
            u[order] = (np.arange(len(idx)) + 0.5) / len(idx)
            key = u + lam * y[idx]
            out[idx[np.lexsort((jitter[idx], key))]] = np.sort(s[idx])
        return out

    lo, hi = 0.0, 1.0
    while (auroc(apply(hi), y) or 0) < goal and hi < 64:
        hi *= 2
    for _ in range(30):
        mid = (lo + hi) / 2
        if (auroc(apply(mid), y) or 0) < goal:
            lo = mid
        else:
            hi = mid
    return apply(hi)


def run(by: dict[str, dict], seeds, cfg: Config, make=None, draws: str = "rng") -> dict[str, list[dict]]:
    """Per reviewer, one summary per seed. `make(reviewer, data, seed)`: a Scores for the
    stream (default: its recorded scores). draws: "rng" (a seeded RNG, as
    bench/autonomy_bound_bench.py) or "hash" (the product's audit_draw per gate id)."""
    out: dict[str, list[dict]] = {}
    for r, d in by.items():
        rows = []
        for seed in seeds:
            provider = make(r, d, seed) if make else Fixed(d["score"])
            u = audit_draws(len(d["right"]), seed, d.get("gate_id") if draws == "hash" else None, r)
            sim = simulate(provider, d["right"], d["task"], seed, cfg, u)
            row = summarize(sim, d["right"])
            row["auroc"] = auroc(sim["scores"], d["right"])
            rows.append(row)
        out[r] = rows
    return out


def pooled(results: dict[str, list[dict]]) -> list[dict]:
    """Per seed, the reviewers pooled."""
    seeds = len(next(iter(results.values())))
    out = []
    for k in range(seeds):
        rows = [rs[k] for rs in results.values()]
        gates = sum(r["gates"] for r in rows)
        alone = sum(r["alone"] for r in rows)
        wrong = sum(r["wrong"] for r in rows)
        out.append(
            dict(
                gates=gates,
                alone=alone,
                share=alone / gates,
                error=wrong / alone if alone else None,
                worst=max((r["worst"] for r in rows if r["worst"] is not None), default=None),
                over=sum(r["over"] for r in rows),
                audits=sum(r["audits"] for r in rows),
                with_autonomy=sum(r["alone"] > 0 for r in rows),
            )
        )
    return out


def streams(path: Path = DEFAULT_GATES) -> dict[str, dict]:
    out = {}
    events = load_events()
    for r, gs in load_gates(path).items():
        out[r] = dict(
            score=np.array([np.nan if g["score"] is None else g["score"] for g in gs], float),
            right=np.array([g["correct"] for g in gs], bool),
            task=np.array([g["task_type"] for g in gs]),
            gate_id=[gate_key(e) for e in events[r]],
        )
    return out


def ms(vals, pct: bool = True) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    k = 100 if pct else 1
    return f"{k * np.mean(vals):.1f} ± {k * np.std(vals):.1f}" if pct else f"{np.mean(vals):.3f} ± {np.std(vals):.3f}"


def table(label: str, results: dict[str, list[dict]]) -> list[str]:
    lines = []
    for r, rows in results.items():
        lines.append(
            f"| {label} | {r} | {ms([x['auroc'] for x in rows], False)} | {ms([x['share'] for x in rows])}"
            f" | {ms([x['error'] for x in rows])}"
            f" | {max((x['worst'] for x in rows if x['worst'] is not None), default=0) * 100:.1f}"
            f" | {sum(x['over'] for x in rows)} | {np.mean([x['audits'] for x in rows]):.0f}"
            f" | {np.mean([x['withdrawals'] for x in rows]):.1f} |"
        )
    p = pooled(results)
    lines.append(
        f"| {label} | **pooled** | | **{ms([x['share'] for x in p])}** | {ms([x['error'] for x in p])}"
        f" | {max((x['worst'] or 0) for x in p) * 100:.1f} | {sum(x['over'] for x in p)}"
        f" | {np.mean([x['audits'] for x in p]):.0f} | |"
    )
    return lines


HEADER = [
    "| candidate | reviewer | AUROC | alone % (mean ± sd) | error alone % | worst stretch % (max)"
    " | stretches > 7.5% | audits | withdrawals |",
    "|---|---|---|---|---|---|---|---|---|",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gates", type=Path, default=DEFAULT_GATES)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--candidates",
        nargs="+",
        default=["shipped", "rerank+0.05", "rerank+0.10", "stake=labelled", "active", "audit=0.10", "audit=0.20"],
    )
    ap.add_argument("--draws", choices=["rng", "hash"], default="rng")
    args = ap.parse_args()
    by = streams(args.gates)
    lines = list(HEADER)
    for cand in args.candidates:
        start = time.perf_counter()
        cfg, data = Config(), by
        if cand.startswith("rerank+"):
            gain = float(cand.split("+")[1])
            data = {r: dict(d, score=rerank(d["score"], d["right"], gain)) for r, d in by.items()}
        elif cand == "stake=labelled":
            cfg = replace(cfg, stake="labelled")
        elif cand == "active":
            cfg = replace(cfg, active=True)
        elif cand == "active+stake=labelled":
            cfg = replace(cfg, active=True, stake="labelled")
        elif cand.startswith("audit="):
            cfg = replace(cfg, audit=float(cand.split("=")[1]))
        elif cand == "labelled-weighting":
            cfg = replace(cfg, weighting="labelled")
        elif cand == "start-1.0":
            cfg = replace(cfg, starts=(1.0,))
        elif cand != "shipped":
            raise SystemExit(f"unknown candidate {cand}")
        lines += table(cand, run(data, args.seeds, cfg, draws=args.draws))
        print(f"# {cand}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(f"Stream: `{args.gates}`, seeds {args.seeds}, audit draws {args.draws}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
