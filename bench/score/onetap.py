"""The one-tap suggestion: which proposed action beats "pre-fill the person's most
frequent action so far", reviewer by reviewer.

Counted as in measure.py: a gate is one tap when the proxy answered it alone, or the
action proposed on the escalated gate is the person's and needs no words (anything but
`correct`). The alone flags are the replay's (the suggestion only changes what an
escalated gate proposes). Also shown: the plain share of right proposals (words or not).

Policies, all online (a gate's suggestion from what came before it):
- model:      the predictor's action (today);
- prefill:    the person's most frequent action so far (the baseline);
- best-tap:   the predictor's likeliest action among those that need no words (its
              class probabilities without `correct`): the button pre-filled with the
              best one-tap answer, the `correct` proposal and its words shown beside;
- habit-unless@t: the habit (when it needs no words), unless the predictor's likeliest
              no-words action differs from it with probability >= t; when the habit
              needs words (`correct`), best-tap;
- fallback@t: the habit when the selector's P(model right) < t, else the model's;
- chooser:    two selectors, one for "the model's action is right" and one for "the
              habit is right"; the one with the larger P(right) * [needs no words].

    sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.onetap --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.score.common import DUMP, load_gates
from bench.score.measure import WORDS
from bench.score.run_selector import load
from bench.score.selector import Selector, SelectorParams


def habits(actual: list[str]) -> list[str | None]:
    seen: Counter[str] = Counter()
    out: list[str | None] = []
    for a in actual:
        out.append(seen.most_common(1)[0][0] if seen else None)
        seen[a] += 1
    return out


def best_tap(probs: dict | None, habit: str | None) -> str | None:
    """The likeliest action that needs no words; the habit before the model's first fit."""
    taps = {a: p for a, p in (probs or {}).items() if a != WORDS}
    return max(taps, key=lambda a: taps[a]) if taps else habit


def policies(d: dict, extra: list[dict], params: SelectorParams, thresholds=(0.5, 0.6, 0.7)) -> dict[str, list]:
    actual = d["actual"]
    habit = habits(actual)
    model = [g.action for g in d["gates"]]
    out: dict[str, list] = {
        "model": model,
        "prefill": habit,
        "best-tap": [best_tap(x.get("probs"), h) for x, h in zip(extra, habit)],
    }
    for t in thresholds:
        pol = []
        for x, h, b in zip(extra, habit, out["best-tap"]):
            taps = {a: p for a, p in (x.get("probs") or {}).items() if a != WORDS}
            if h is None or h == WORDS or (b != h and taps.get(b, 0.0) >= t):
                pol.append(b)
            else:
                pol.append(h)
        out[f"habit-unless@{t}"] = pol
    sel_model, sel_habit = Selector(params), Selector(params)
    p_model, p_habit = [], []
    for i, g in enumerate(d["gates"]):
        hg = replace(g, action=habit[i], score=(g.probs or {}).get(habit[i]) if habit[i] else None)
        pm, ph = sel_model.confidence(g), sel_habit.confidence(hg)
        # Before a selector's first fit: the predictor's own probability for each action.
        pm = pm if pm is not None else (g.score if g.score is not None else 0.0)
        ph = ph if ph is not None else (hg.score if hg.score is not None else 0.0)
        p_model.append(pm)
        p_habit.append(ph)
        sel_model.observe(g, actual[i])
        if habit[i] is not None:
            sel_habit.observe(hg, actual[i])
        else:
            sel_habit.observe(replace(hg, action=None), actual[i])
    for t in thresholds:
        out[f"fallback@{t}"] = [h if (p < t and h is not None) else m for m, h, p in zip(model, habit, p_model)]
    chooser = []
    for m, h, pm, ph in zip(model, habit, p_model, p_habit):
        vm = pm * (m is not None and m != WORDS)
        vh = ph * (h is not None and h != WORDS)
        chooser.append(h if vh > vm else m)
    out["chooser"] = chooser
    return out


def shares(proposed: list, actual: list[str], alone: np.ndarray) -> tuple[float, float]:
    right = np.array([p == a for p, a in zip(proposed, actual)], bool)
    words = np.array([a == WORDS for a in actual], bool)
    return float((alone | (right & ~words)).mean()), float((alone | right).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--replay-seed", type=int, default=0)
    args = ap.parse_args()
    data = load(args.replay_seed)
    raw = load_gates(Path(str(DUMP).format(seed=args.replay_seed)))
    totals: dict[str, list] = {}
    lines = [
        "| policy | reviewer | one-tap % (mean over seeds) | right proposed or alone % |",
        "|---|---|---|---|",
    ]
    per: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r, d in data.items():
        alone = np.array([x["autonomous"] for x in raw[r]], bool)
        for seed in args.seeds:
            pol = policies(d, raw[r], SelectorParams(seed=seed))
            for name, proposed in pol.items():
                per.setdefault(name, {}).setdefault(r, []).append(shares(proposed, d["actual"], alone))
                totals.setdefault(name, []).append((seed, len(d["actual"]), *shares(proposed, d["actual"], alone)))
        print(f"# {r} done", file=sys.stderr)
    for r, d in data.items():  # the baseline: pre-fill on every gate, nothing answered alone
        base = shares(habits(d["actual"]), d["actual"], np.zeros(len(d["actual"]), bool))
        per.setdefault("baseline: pre-fill, no autonomy", {})[r] = [base] * len(args.seeds)
        for seed in args.seeds:
            totals.setdefault("baseline: pre-fill, no autonomy", []).append((seed, len(d["actual"]), *base))
    for name, by in per.items():
        for r, vals in by.items():
            a = np.array(vals)
            lines.append(f"| {name} | {r} | {100 * a[:, 0].mean():.2f} | {100 * a[:, 1].mean():.2f} |")
        rows = totals[name]
        pooled = []
        for seed in args.seeds:
            rs = [x for x in rows if x[0] == seed]
            n = sum(x[1] for x in rs)
            pooled.append((sum(x[1] * x[2] for x in rs) / n, sum(x[1] * x[3] for x in rs) / n))
        p = np.array(pooled)
        lines.append(f"| {name} | **pooled** | **{100 * p[:, 0].mean():.2f}** | {100 * p[:, 1].mean():.2f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
