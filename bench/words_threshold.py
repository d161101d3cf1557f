"""The words metric's sentence matcher against hand judgments (bench/words-judged.jsonl):
recomputes each pair's cosine with the packaged embedding model and reports, per
threshold, the agreement with the judgments and the matcher's precision and recall.

    python -m bench.words_threshold [bench/words-judged.jsonl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

JUDGED = Path(__file__).with_name("words-judged.jsonl")
THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75)


def load(path: Path = JUDGED) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "header" not in r]


def cosines(rows: list[dict], embedder) -> np.ndarray:
    h = embedder.embed([r["human"] for r in rows])
    p = embedder.embed([r["predicted"] for r in rows])
    return np.sum(h * p, axis=1)


def agreement(rows: list[dict], sims: np.ndarray, threshold: float) -> dict[str, float]:
    same = np.array([r["same"] for r in rows], dtype=bool)
    match = sims >= threshold
    tp = int(np.sum(match & same))
    return {
        "threshold": threshold,
        "agreement": float(np.mean(match == same)),
        "precision": tp / int(match.sum()) if match.any() else float("nan"),
        "recall": tp / int(same.sum()) if same.any() else float("nan"),
    }


def main() -> None:
    from vicar.eval.words import MATCH_THRESHOLD
    from vicar.memory.embedder import default_embedder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("judged", type=Path, nargs="?", default=JUDGED, help="hand-judged pairs (JSON lines)")
    rows = load(ap.parse_args().judged)
    sims = cosines(rows, default_embedder())
    print(f"{len(rows)} judged pairs, {sum(r['same'] for r in rows)} judged the same concern")
    print("threshold  agreement  precision  recall")
    for t in sorted({*THRESHOLDS, MATCH_THRESHOLD}):
        a = agreement(rows, sims, t)
        mark = "  <- MATCH_THRESHOLD" if t == MATCH_THRESHOLD else ""
        print(f"{t:9.2f}  {a['agreement']:9.3f}  {a['precision']:9.3f}  {a['recall']:6.3f}{mark}")


if __name__ == "__main__":
    main()
