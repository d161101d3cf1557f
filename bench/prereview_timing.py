"""The pre-review's cost per gate: replays one reviewer's gates (the shipped `default`,
warm embedding cache) and times each `pre_review` call on the posterior context the gate
saw, reporting p50/p90/p99 overall and at a memory of at least --at chunks.

    VICAR_DATA_DIR=/tmp/c-data python -m bench.prereview_timing \\
        ../shared/datasets/gate-replay/dev/git-whats-cooking.jsonl.gz --reviewer "Junio C Hamano"
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from vicar.eval import replay
from vicar.eval.dataset import load_events
from vicar.memory.embedder import make_embedder
from vicar.models import GateRequest, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", type=Path)
    ap.add_argument("--reviewer", default=None)
    ap.add_argument("--at", type=int, default=10_000, help="memory size (chunks) for the second figure")
    args = ap.parse_args()
    settings = Settings.from_env()
    events = load_events([args.file])
    reviewer = args.reviewer or max(events, key=lambda r: len(events[r]))
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    timed: list[tuple[int, float]] = []  # (memory size, seconds)
    real = replay.pre_review

    def timing(
        ctx: RetrievalContext, request: GateRequest, artifact: str, *args: Any, **kw: Any
    ) -> list[PreReviewItem]:
        start = time.perf_counter()
        out = real(ctx, request, artifact, *args, **kw)
        timed.append((ctx.memory_size, time.perf_counter() - start))
        return out

    replay.pre_review = timing  # the replay calls it once per gate
    [default] = [v for v in replay.standard_variants() if v.name == "default"]
    replay.replay_reviewer(events[reviewer], default, embedder, settings)
    sizes = np.array([s for s, _ in timed])
    ms = np.array([t for _, t in timed]) * 1e3
    big = ms[sizes >= args.at]
    print(f"{reviewer}: {len(ms)} calls, largest memory {sizes.max()} chunks")
    print(
        f"all:            p50 {np.median(ms):.2f} ms  p90 {np.percentile(ms, 90):.2f}  p99 {np.percentile(ms, 99):.2f}"
    )
    if len(big):
        print(
            f">= {args.at} chunks: {len(big)} calls, p50 {np.median(big):.2f} ms  "
            f"p90 {np.percentile(big, 90):.2f}  p99 {np.percentile(big, 99):.2f}"
        )


if __name__ == "__main__":
    main()
