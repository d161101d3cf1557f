"""Replay the shipped default over a team's file and keep, per gate, the distributions the
learned predictor weighed (the memory vote's, the model's, the team prior's), the mixture,
the wish to be asked and the team's distribution, for studying the weighing offline
(bench/team_choose.py): the candidates' distributions do not depend on how they are
weighed, so a weighing can be simulated over the dump exactly.

The replay is the product's (`vicar.eval.run.replay_teams`'s order, `replay_reviewer`);
the only addition is a LearnedPredictor that remembers its last posterior's features.

    VICAR_DATA_DIR=/tmp/perm python -m bench.team_dump /tmp/halves/dev-half0.jsonl.gz --out /tmp/dump-half0.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

from rich.console import Console

from vicar.eval.dataset import load_events
from vicar.eval.replay import Variant, contribution, replay_reviewer
from vicar.eval.run import warm_embeddings
from vicar.memory.embedder import make_embedder
from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.team import KindCounts
from vicar.settings import Settings


class Recording(LearnedPredictor):
    """The shipped learned predictor; remembers its last posterior's features."""

    last: dict | None = None

    def posterior(self, request, ctx, artifact, prior, dialog=()):
        result = super().posterior(request, ctx, artifact, prior, dialog)
        self.last = dict(result.features or {})
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=None, help="at most this many gates per reviewer")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    console = Console(stderr=True)
    settings = Settings.from_env()
    events = load_events(args.files)
    if args.limit:
        events = {r: evs[: args.limit] for r, evs in events.items()}
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    warm_embeddings(events, embedder, console)
    variant = Variant(name="default", predictor="learned", seed=args.seed)
    teams: dict[str, KindCounts] = {}
    start = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as fh:
        for reviewer, evs in events.items():
            counts = teams.setdefault(evs[0].team, KindCounts()) if evs and evs[0].team else None
            predictor = Recording(settings.predictor, team=counts)
            seen: list[dict | None] = []
            preds = replay_reviewer(
                evs, variant, embedder, settings, lambda _: seen.append(predictor.last), predictor, team=counts
            )
            if counts is not None:
                counts.merge(contribution(evs, preds))
            for i, (e, p, features) in enumerate(zip(evs, preds, seen)):
                row = {
                    "reviewer": reviewer,
                    "order": i,
                    "split": e.split,
                    "ask_first": e.ask_first,
                    "actual": p.actual,
                    "predicted": p.predicted,
                    "confidence": p.posterior_confidence,
                    "alone_action": p.alone_action,
                    "alone_score": p.alone_score,
                    "wants_asked": p.wants_asked,
                    "autonomous": p.autonomous,
                    "features": {k: v for k, v in (features or {}).items() if ":" in k},
                }
                fh.write(json.dumps(row) + "\n")
            print(f"{reviewer}: {len(evs)} gates, {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
