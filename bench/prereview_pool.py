"""Where the pre-review's cap is (issue 27 item 2): the candidate pool's concern recall,
and the best 4 of its sentences chosen with the human's answer known (the oracle), for
the shipped pool (the sentences of the posterior context the gate's retrieval built)
against a pool that adds the person's replies to the k most similar past artifacts, as
the similarity baselines search them (every earlier event of the reviewer, by the
artifact's MiniLM vector, vicar/eval/words.py:baselines).

Replays the shipped `default` (seed as given) and captures the posterior context each
gate's pre-review saw; scored on correct/reject events with the words metric's online
themes (vicar/eval/words.py), pooled micro over events like the metric.

    VICAR_DATA_DIR=/tmp/a2-data python -m bench.prereview_pool \\
        ../shared/datasets/gate-replay/dev/lkml-hwmon.jsonl.gz --k 1 3 5 --seed 1
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from vicar.eval import replay
from vicar.eval.dataset import GateEvent, load_events
from vicar.eval.words import SCORED, Themes
from vicar.memory.chunk import ARTIFACT_EMBED_CHARS
from vicar.memory.embedder import make_embedder
from vicar.models import AnsweredBy, ChunkSummary, GateRequest, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy.concerns import strip_tags
from vicar.proxy.prereview import pre_review, rank
from vicar.settings import Settings

ORACLE_K = 4


class Tally:
    def __init__(self) -> None:
        self.hit = self.said = self.raised = self.events = 0

    def add(self, human: set[str], raised: set[str]) -> None:
        self.events += 1
        self.hit += len(human & raised)
        self.said += len(human)
        self.raised += len(raised)

    def row(self) -> str:
        r = self.hit / self.said if self.said else 0.0
        p = self.hit / self.raised if self.raised else 0.0
        f = 2 * r * p / (r + p) if r + p else 0.0
        return f"R {r:.3f} P {p:.3f} F1 {f:.3f} raised/ev {self.raised / max(self.events, 1):.1f}"


def artifact_text(e: GateEvent) -> str:
    """The text the words baselines embed for an event (vicar.eval.words does the same),
    which the replay's consult path has already embedded: the warm cache holds it."""
    return e.artifact_text[:ARTIFACT_EMBED_CHARS] or e.artifact_title or e.question


def oracle(human: set[str], cands: list[set[str]], k: int = ORACLE_K) -> set[str]:
    """Greedy: add the sentence that most raises this event's F1, up to k, while it rises
    (a lower bound of the exact best-of-k, close to it on sets this small)."""
    chosen: set[str] = set()
    best = 0.0
    for _ in range(k):
        pick, pick_f = None, best
        for c in cands:
            new = chosen | c  # the metric counts the joined text's concern set
            f = 2 * len(human & new) / (len(human) + len(new)) if human or new else 0.0
            if f > pick_f:
                pick, pick_f = c, f
        if pick is None:
            break
        chosen |= pick
        best = pick_f
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--k", type=int, nargs="+", default=[5], help="similar past artifacts whose replies are added")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, nargs="*", default=[], help="also score the ranking's first j sentences")
    args = ap.parse_args()
    settings = Settings.from_env()
    events = load_events(args.files)
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    captured: list = []
    real = replay.pre_review

    def capture(
        ctx: RetrievalContext, request: GateRequest, artifact: str, *args: Any, **kw: Any
    ) -> list[PreReviewItem]:
        captured.append((ctx, request, artifact))
        return real(ctx, request, artifact, *args, **kw)

    replay.pre_review = capture  # the replay calls it once per gate, in order
    [default] = [v for v in replay.standard_variants() if v.name == "default"]
    default = default.model_copy(update={"seed": args.seed})
    labels = ["shipped pool: pre-review top 4", "shipped pool: all", "shipped pool: oracle 4"]
    labels += [f"shipped pool: ranking top {j}" for j in args.top]
    for k in args.k:
        labels += [f"+{k} similar: pre-review top 4", f"+{k} similar: all", f"+{k} similar: oracle 4"]
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    for reviewer, evs in events.items():
        captured.clear()
        replay.replay_reviewer(evs, default, embedder, settings)
        assert len(captured) == len(evs)
        vecs = embedder.embed([artifact_text(e) for e in evs])
        themes = Themes()
        names = (reviewer,)
        past: list[int] = []
        for i, e in enumerate(evs):
            if e.action.value in SCORED:
                now = themes.current()
                human = themes.concerns(strip_tags(e.response, names), now)
                ctx, request, artifact = captured[i]

                def concerns(text: str) -> set[str]:
                    return themes.concerns(strip_tags(text, names), now)

                def score(label: str, ctx_) -> None:
                    top = pre_review(ctx_, request, artifact)
                    tallies[label + ": pre-review top 4"][reviewer].add(
                        human, concerns("\n\n".join(t.text for t in top))
                    )
                    cands = [concerns(it.text) for it in rank(ctx_, request, artifact)]
                    tallies[label + ": all"][reviewer].add(human, set().union(*cands) if cands else set())
                    tallies[label + ": oracle 4"][reviewer].add(human, oracle(human, cands))

                score("shipped pool", ctx)
                ranked = [concerns(it.text) for it in rank(ctx, request, artifact)]
                for j in args.top:
                    tallies[f"shipped pool: ranking top {j}"][reviewer].add(human, set().union(*ranked[:j]))
                sims = vecs[past] @ vecs[i] if past else np.zeros(0)
                order = np.argsort(-sims, kind="stable")
                for k in args.k:
                    extra = [
                        ChunkSummary(
                            chunk_id=f"similar/{evs[past[j]].gate_id}",
                            kind="gate",
                            state=evs[past[j]].state.value,
                            task_type=evs[past[j]].task_type,
                            outcome=evs[past[j]].action.value,
                            answered_by=AnsweredBy.human,
                            human_response=evs[past[j]].response,
                            created_n=past[j] + 1,
                            gate_id=evs[past[j]].gate_id,
                            activation=0.0,
                            similarity=float(sims[j]),
                            score=0.0,
                        )
                        for j in order[:k]
                    ]
                    have = {c.gate_id for c in ctx.chunks}
                    wide = ctx.model_copy(
                        update={"chunks": [*ctx.chunks, *(c for c in extra if c.gate_id not in have)]}
                    )
                    score(f"+{k} similar", wide)
            if e.response.strip():
                past.append(i)
            themes.add(e.action.value, strip_tags(e.response, names))
    for label in labels:
        pooled = Tally()
        for reviewer, t in tallies[label].items():
            print(f"{label:34s} {reviewer:22s} ev {t.events:5d} {t.row()}")
            for f in ("hit", "said", "raised", "events"):
                setattr(pooled, f, getattr(pooled, f) + getattr(t, f))
        print(f"{label:34s} {'pooled':22s} ev {pooled.events:5d} {pooled.row()}")


if __name__ == "__main__":
    main()
