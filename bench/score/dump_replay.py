"""Replay the shipped default over the dev data and keep, per gate, what the records in
bench/replay/gates-*.jsonl.gz leave out: the proposed action, the learned model's class
probabilities, the memory vote's features and the guards that fired.

The replay is the product's own (`vicar.eval.replay.replay_reviewer`, variant
`default`); the only addition is a LearnedPredictor subclass that remembers the
probabilities of its last posterior (recomputed from the same cached feature row, so
the predictions are unchanged). The words scoring of `vicar eval replay` is skipped.

    VICAR_DATA_DIR=/tmp/score-data sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.dump_replay \
        /work/shared/datasets/gate-replay/dev/*.jsonl.gz --seed 0 --out bench/score/data/replay-seed0.jsonl.gz

The first run embeds the whole dev data once (about 30 min on one core); later runs
reuse the cache in $VICAR_DATA_DIR/cache.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

from rich.console import Console

from bench.score import common
from vicar.eval.dataset import load_events
from vicar.eval.replay import Variant, replay_reviewer
from vicar.eval.run import warm_embeddings
from vicar.memory.embedder import make_embedder
from vicar.models import RequestKind
from vicar.proxy.learned import LearnedPredictor


class RecordingPredictor(LearnedPredictor):
    """The shipped learned predictor; remembers its last prediction's class
    probabilities and memory features (the posterior's: it runs after the prior)."""

    last: dict | None = None

    def _predict(self, request, ctx):
        result = super()._predict(request, ctx)
        probs = None
        if self.model is not None and request.kind is RequestKind.gate:
            row = self.history.features(request, result.features)  # the cached row: same prediction
            probs = {a.value: round(float(p), 5) for a, p in zip(self.model.classes, self.model.proba(row)[0])}
        self.last = {
            "probs": probs,
            "memory": dict(result.features or {}),
            "model": self.model.version if self.model else 0,
        }
        return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    console = Console(stderr=True)
    settings = common.settings()
    events = load_events(args.files)
    if args.limit:
        events = {r: evs[: args.limit] for r, evs in events.items()}
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    seconds = warm_embeddings(events, embedder, console)
    print(f"embeddings ready in {seconds:.0f} s", file=sys.stderr)
    variant = Variant(name="default", predictor="learned", seed=args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with gzip.open(args.out, "wt") as fh:
        for reviewer, evs in events.items():
            predictor = RecordingPredictor(settings.predictor)
            seen: list[dict | None] = []
            preds = replay_reviewer(
                evs, variant, embedder, settings, progress=lambda _: seen.append(predictor.last), predictor=predictor
            )
            for i, (e, p, extra) in enumerate(zip(evs, preds, seen)):
                row = {
                    "reviewer": reviewer,
                    "order": i,
                    "gate_id": e.gate_id,
                    "task_type": e.task_type,
                    "actual": p.actual,
                    "predicted": p.predicted,
                    "score": p.posterior_confidence if p.predicted is not None else None,
                    "shown": p.confidence,
                    "prior": p.prior_confidence,
                    "prior_predicted": p.prior_predicted,
                    "correct": p.correct,
                    "autonomous": p.autonomous,
                    "fired": p.fired,
                    "bound": p.bound,
                    "probs": (extra or {}).get("probs"),
                    "memory": (extra or {}).get("memory"),
                    "model": (extra or {}).get("model"),
                }
                fh.write(json.dumps(row) + "\n")
            print(f"{reviewer}: {len(evs)} gates, {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
