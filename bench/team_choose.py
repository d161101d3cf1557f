"""Weighing the candidate predictors, simulated over bench/team_dump.py's dumps: the
shipped Bayesian mixture (vicar.proxy.choose) against choosing the best candidate so far,
each candidate alone, and the mixture with a head start for the team prior; on each half
of the people (choose on one, confirm on the other).

    python -m bench.team_choose /tmp/dump-half0.jsonl.gz /tmp/dump-half1.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vicar.eval.metrics import Prediction
from vicar.eval.team_scores import hindsight
from vicar.proxy.choose import Chooser, from_features

EARLY = range(1, 5)


def load(path: Path) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt") as fh:
        for line in fh:
            row = json.loads(line)
            by[row["reviewer"]].append(row)
    return dict(by)


Weigher = Callable[[Chooser, dict[str, dict[str, float]]], dict[str, float]]


def mixture(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
    return chooser.mix(cands)[0]


def best(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
    w = chooser.weights(list(cands))
    return dict(cands[max(w, key=lambda c: w[c])])


def only(name: str, fallback: tuple[str, ...] = ()) -> Weigher:
    def pick(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
        for c in (name, *fallback):
            if c in cands:
                return dict(cands[c])
        return {}

    return pick


def head_start(nats: float) -> Weigher:
    """The mixture, the team prior starting `nats` ahead of a candidate that joins."""

    def pick(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
        if "team" in cands and "team" not in chooser.loss:
            chooser.loss["team"] = chooser.mixture_loss - nats
        return chooser.mix(cands)[0]

    return pick


def ahead(candidate: str, nats: float) -> Weigher:
    """The mixture, `candidate` starting `nats` ahead when it joins."""

    def pick(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
        if candidate in cands and candidate not in chooser.loss:
            chooser.loss[candidate] = chooser.mixture_loss - nats
        return chooser.mix(cands)[0]

    return pick


def geometric(chooser: Chooser, cands: dict[str, dict[str, float]]) -> dict[str, float]:
    """Log-linear pooling with the mixture's weights."""
    w = chooser.weights(list(cands))
    actions = {a for d in cands.values() for a in d}
    raw = {a: math.exp(sum(w[c] * math.log(max(d.get(a, 0.0), 1e-4)) for c, d in cands.items())) for a in actions}
    total = sum(raw.values())
    return {a: v / total for a, v in raw.items()}


DESIGNS: dict[str, Weigher] = {
    "mixture (shipped)": mixture,
    "best so far": best,
    "team prior alone": only("team", ("vote",)),
    "memory vote alone": only("vote"),
    "model after its fit": only("model", ("vote",)),
    "mixture, team 2 nats ahead": head_start(2.0),
    "mixture, vote 1 nat ahead": ahead("vote", 1.0),
    "geometric pooling": geometric,
}


def simulate(people: dict[str, list[dict]], weigh: Weigher) -> dict[str, float | None]:
    preds: list[Prediction] = []
    early: list[bool] = []
    loss = []
    for rows in people.values():
        chooser = Chooser()
        for i, row in enumerate(rows):
            cands = from_features(row["features"])
            dist = weigh(chooser, cands) if cands else {}
            asked = {k[4:]: v for k, v in row["features"].items() if k.startswith("ask:")}
            actions = {a: p for a, p in dist.items()}
            predicted = max(actions, key=lambda a: actions[a]) if actions else None
            lone = {a: p * (1 - asked.get(a, 0.0)) for a, p in actions.items()}
            alone = max(lone, key=lambda a: lone[a]) if lone else None
            preds.append(
                Prediction(
                    seq=i,
                    actual=row["actual"],
                    predicted=predicted,
                    confidence=actions.get(predicted, 0.0) if predicted else 0.0,
                    autonomous=False,
                    split=row["split"],
                    ask_first=row["ask_first"],
                    alone_action=alone,
                    alone_score=lone.get(alone) if alone else None,
                )
            )
            if i in EARLY:
                early.append(predicted == row["actual"])
            loss.append(-math.log(max(actions.get(row["actual"], 0.0), 0.01)))
            chooser.observe(cands, row["actual"])
    test = [p for p in preds if p.split == "test" and not p.ask_first]
    share, _ = hindsight([p for p in preds if p.split == "test"])
    return {
        "test (proposal)": float(np.mean([p.correct for p in test])),
        "test (alone answer)": float(np.mean([p.alone_action == p.actual for p in test])),
        "gates 2-5": float(np.mean(early)),
        "all": float(np.mean([p.correct for p in preds])),
        "log-loss": float(np.mean(loss)),
        "hindsight alone": share,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", type=Path, nargs="+", help="bench/team_dump.py outputs, one per half")
    args = ap.parse_args()
    for path in args.dumps:
        people = load(path)
        print(f"\n{path.name}: {len(people)} people")
        rows = [(name, simulate(people, weigh)) for name, weigh in DESIGNS.items()]
        cols = list(rows[0][1])
        print("| design | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 1))
        for name, m in rows:
            print(f"| {name} | " + " | ".join("—" if v is None else f"{v:.3f}" for v in m.values()) + " |")


if __name__ == "__main__":
    main()
