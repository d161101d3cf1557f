"""What the score is worth, per reviewer and pooled (issue 36, "Measure what matters").

From a replay's per-gate records (score, right, alone, task type) and the dataset (the
person's actions, in order):

- AUROC and AUPRC of the score for "the proxy's action is the person's" (gates with a
  score; AUPRC beside its base rate, the share right);
- ECE of the score (10 bins) and of the confidence shown when the records have it;
- the one-tap share: gates answered alone plus escalated gates where the proposed
  action was right and needs no words (anything but `correct`, whose words the person
  still writes), beside the pre-fill baseline: the person's most frequent action so
  far (online), counted the same way (right, and not `correct`); and the looser
  "right action proposed" share beside the pre-fill's plain accuracy;
- realized error per context (task type) with >= 10 answers alone.

    python -m bench.score.measure                       # bench/replay/gates-default.jsonl.gz
    python -m bench.score.measure --gates bench/score/data/replay-seed0.jsonl.gz
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from bench.score.common import DEFAULT_GATES, joined, load_events, load_gates

WORDS = "correct"  # the action whose words the person still writes: not one tap
TARGET = 0.05
MIN_CONTEXT_ALONE = 10


def auroc(scores, right) -> float | None:
    s, y = np.asarray(scores, float), np.asarray(right, bool)
    keep = ~np.isnan(s)
    s, y = s[keep], y[keep]
    return float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None


def auprc(scores, right) -> float | None:
    s, y = np.asarray(scores, float), np.asarray(right, bool)
    keep = ~np.isnan(s)
    s, y = s[keep], y[keep]
    return float(average_precision_score(y, s)) if 0 < y.sum() < len(y) else None


def ece(conf, right, bins: int = 10) -> float:
    """The product's ECE (vicar.eval.metrics.ece): equal-width bins, the last closed."""
    c, y = np.asarray(conf, float), np.asarray(right, float)
    keep = ~np.isnan(c)
    c, y = c[keep], y[keep]
    if not len(c):
        return 0.0
    idx = np.minimum((c * bins).astype(int), bins - 1)
    out = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            out += m.sum() / len(c) * abs(y[m].mean() - c[m].mean())
    return float(out)


def prefill(actions: list[str]) -> list[str | None]:
    """The person's most frequent action before each gate (None at the first; ties: the
    one reached first, as Counter.most_common keeps insertion order)."""
    seen: Counter[str] = Counter()
    out: list[str | None] = []
    for a in actions:
        out.append(seen.most_common(1)[0][0] if seen else None)
        seen[a] += 1
    return out


def one_tap(alone, right, actual) -> np.ndarray:
    """Per gate: answered alone, or escalated with the right action proposed and it needs no words."""
    a, y, act = np.asarray(alone, bool), np.asarray(right, bool), np.asarray(actual)
    return a | (y & (act != WORDS))


def context_errors(tasks, alone, right, least: int = MIN_CONTEXT_ALONE) -> list[tuple[str, int, float]]:
    """(task type, answers alone, their error) for contexts with >= least answers alone, worst first."""
    n: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for t, a, y in zip(tasks, alone, right):
        if a:
            n[t] += 1
            wrong[t] += not y
    rows = [(t, k, wrong[t] / k) for t, k in n.items() if k >= least]
    return sorted(rows, key=lambda r: -r[2])


def stream(pairs: list[tuple[dict, dict]], score_field: str = "score") -> dict[str, np.ndarray]:
    g = [p[0] for p in pairs]
    e = [p[1] for p in pairs]
    actual = [x["action"] for x in e]
    return dict(
        score=np.array([np.nan if x.get(score_field) is None else x[score_field] for x in g], float),
        shown=np.array([np.nan if x.get("shown") is None else x["shown"] for x in g], float),
        right=np.array([x["correct"] for x in g], bool),
        alone=np.array([x["autonomous"] for x in g], bool),
        task=np.array([x["task_type"] for x in g]),
        actual=np.array(actual),
        prefill=np.array(prefill(actual), dtype=object),
    )


def measure(s: dict[str, np.ndarray]) -> dict:
    pre = s["prefill"]
    pre_right = np.array([p == a for p, a in zip(pre, s["actual"])], bool)
    scored = ~np.isnan(s["score"])
    out = dict(
        gates=len(s["right"]),
        scored=int(scored.sum()),
        right=float(s["right"].mean()),
        auroc=auroc(s["score"], s["right"]),
        auprc=auprc(s["score"], s["right"]),
        base_rate=float(s["right"][scored].mean()) if scored.any() else None,
        ece=ece(s["score"], s["right"]),
        ece_shown=ece(s["shown"], s["right"]) if not np.isnan(s["shown"]).all() else None,
        alone=float(s["alone"].mean()),
        alone_error=float(1 - s["right"][s["alone"]].mean()) if s["alone"].any() else None,
        one_tap=float(one_tap(s["alone"], s["right"], s["actual"]).mean()),
        prefill_one_tap=float((pre_right & (s["actual"] != WORDS)).mean()),
        right_or_alone=float((s["alone"] | s["right"]).mean()),
        prefill_right=float(pre_right.mean()),
        right_words=float((s["right"] & (s["actual"] == WORDS)).mean()),
        contexts=context_errors(s["task"], s["alone"], s["right"]),
    )
    return out


def concat(streams: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([s[k] for s in streams]) for k in streams[0]}


def f(x, d: int = 3) -> str:
    return "—" if x is None else f"{x:.{d}f}"


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def report(gates_path: Path, score_field: str = "score") -> str:
    data = joined(load_gates(gates_path), load_events())
    streams = {r: stream(p, score_field) for r, p in data.items()}
    results = {r: measure(s) for r, s in streams.items()}
    results["pooled"] = measure(concat(list(streams.values())))
    lines = [
        f"Records: `{gates_path}`, score field `{score_field}`",
        "",
        "| reviewer | gates | AUROC | AUPRC (base rate) | ECE score | ECE shown | alone | error alone"
        " | one-tap | pre-fill one-tap | right or alone | pre-fill right | right `correct` calls |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, m in results.items():
        lines.append(
            f"| {r} | {m['gates']} | {f(m['auroc'])} | {f(m['auprc'])} ({f(m['base_rate'])}) | {f(m['ece'])}"
            f" | {f(m['ece_shown'])} | {pct(m['alone'])} | {pct(m['alone_error'])} | {pct(m['one_tap'])}"
            f" | {pct(m['prefill_one_tap'])} | {pct(m['right_or_alone'])} | {pct(m['prefill_right'])}"
            f" | {pct(m['right_words'])} |"
        )
    lines += ["", f"Realized error per context with >= {MIN_CONTEXT_ALONE} answers alone (target {TARGET:.0%}):", ""]
    lines += ["| reviewer | task type | alone | error | × target |", "|---|---|---|---|---|"]
    for r, m in results.items():
        if r == "pooled":
            continue
        for t, k, e in m["contexts"]:
            lines.append(f"| {r} | {t} | {k} | {pct(e)} | {e / TARGET:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gates", type=Path, default=DEFAULT_GATES)
    ap.add_argument("--score-field", default="score")
    args = ap.parse_args()
    print(report(args.gates, args.score_field))


if __name__ == "__main__":
    main()
