"""Can a learned concern model lift the pre-review's precision? (issue 27 item 2, an
experiment; nothing here ships.)

The pool holds the answer (the best 4 of its sentences chosen knowing the human's reply
score F1 0.705 on lkml-hwmon) but the shipped ranking picks them at about the pool's own
precision. Tested here: an online per-reviewer model of WHICH concerns (the metric's
vocabulary: the eight categories and the reviewer's current themes) this person raises
given the artifact's features, trained after each correction/rejection on that event
only (no future), then used to choose the items:

- base rate: p(concern) = its share of the person's past corrections, no features;
- model: a logistic residual on top of the base rate's log-odds, per concern, over
  hashed artifact features (paths, directories, extensions, tests/docs/bindings touched,
  size, the title's and question's words, state and task type, the concerns of the
  lineage's earlier verdicts and of the retrieved pool), one SGD step per event;
- each p feeds two choices: *rerank* (the shipped score plus ALPHA times the sum of the
  item's concerns' p) and *cover* (greedy: add the item that most raises the expected
  F1 2*sum p / (E|human| + |raised|) of the joined items, up to 4 and the budget).

Replays the shipped `default` once per stream (seed as given) and caches the contexts
each gate's pre-review saw (--cache), then scores like bench/prereview_pool.py (words
metric's online themes, correct/reject events, pooled micro).

    VICAR_DATA_DIR=/tmp/a3-data nice -n 19 python -m bench.prereview_concern_model \\
        ../shared/datasets/gate-replay/dev/lkml-hwmon.jsonl.gz --cache /tmp/a3/hwmon.pkl
"""

from __future__ import annotations

import argparse
import math
import pickle
import re
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.prereview_pool import Tally, oracle
from vicar.eval.words import SCORED, Themes
from vicar.models import GateRequest, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.proxy.concerns import CATEGORIES, content_words, strip_tags
from vicar.proxy.prereview import DEFAULT_BUDGET, DEFAULT_K, rank, select

DIM = 1 << 14  # hashed feature space
RATE = 0.1  # the residual logistic's SGD step
L2 = 1e-4
ALPHA = 1.0  # rerank: weight of the predicted concerns' probabilities against the shipped score
_PATH = re.compile(r"^(?:diff --git a/|\+\+\+ b/|--- a/)(\S+)", re.M)
_VERSION = re.compile(r"\bv[2-9]\b")
# A feature: the artifact ships tests. The cue the pre-review's ranking uses for "touches"
# (vicar/proxy/prereview.py keeps it private), copied as it stood when these figures were made.
TEST_IN_ARTIFACT = re.compile(r"(?:^|/)(?:tests?|selftests?|t)/|test_\w+|_test\.|\.t\b|\bt\d{4}-", re.I | re.M)
_FILE = re.compile(r"\b[\w./-]+\.(?:c|h|py|rs|go|rst|txt|yaml|yml|json|sh|dts|dtsi|md|adoc)\b")


def capture(files: list[Path], seed: int) -> dict[str, list]:
    """{reviewer: [(event, (ctx, request, artifact) or None)]}: the contexts the shipped
    pre-review saw, kept for correct/reject events."""
    from vicar.eval import replay
    from vicar.eval.dataset import load_events
    from vicar.memory.embedder import make_embedder
    from vicar.settings import Settings

    settings = Settings.from_env()
    events = load_events(files)
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    seen: list = []
    real = replay.pre_review

    def spy(ctx: RetrievalContext, request: GateRequest, artifact: str, *args: Any, **kw: Any) -> list[PreReviewItem]:
        seen.append((ctx, request, artifact))
        return real(ctx, request, artifact, *args, **kw)

    replay.pre_review = spy
    [default] = [v for v in replay.standard_variants() if v.name == "default"]
    default = default.model_copy(update={"seed": seed})
    out = {}
    for reviewer, evs in events.items():
        seen.clear()
        replay.replay_reviewer(evs, default, embedder, settings)
        assert len(seen) == len(evs)
        out[reviewer] = [(e, seen[i] if e.action.value in SCORED else None) for i, e in enumerate(evs)]
    return out


def features(e, ctx, concerns_of) -> list[str]:
    """The artifact's features, as strings to hash: what it touches, how big it is, what the
    question and title say, and the concerns already raised on its lineage and in the pool."""
    art = e.artifact_text or ""
    paths = set(_PATH.findall(art)) or set(_FILE.findall(art[:5000]))
    f = [f"state:{e.state.value}", f"task:{e.task_type}", f"size:{int(math.log2(1 + len(art)))}"]
    f.append(f"files:{min(len(paths), 8)}")
    for p in sorted(paths)[:30]:
        parts = p.split("/")
        f += [f"dir:{d}" for d in parts[:-1][:3]]
        f.append(f"ext:{p.rsplit('.', 1)[-1] if '.' in parts[-1] else ''}")
        low = p.lower()
        for tag, cue in (
            ("doc", "documentation/"),
            ("bindings", "bindings"),
            ("kconfig", "kconfig"),
            ("makefile", "makefile"),
        ):
            if cue in low:
                f.append(f"touch:{tag}")
    f.append(f"has_test:{bool(TEST_IN_ARTIFACT.search(art[:20000]))}")
    f.append(f"version:{bool(_VERSION.search(e.artifact_title or ''))}")
    f += [f"title:{w}" for w in sorted(content_words(e.artifact_title or ""))[:20]]
    f += [f"q:{w}" for w in sorted(content_words(e.question or ""))[:20]]
    for v in ctx.lineage_history:
        f.append(f"lin_action:{v.action}")
        f += [f"lin:{c}" for c in concerns_of(v.response)]
    pool: Counter[str] = Counter()
    for c in (*ctx.chunks, *ctx.similar_work):
        if c.human_response and c.outcome in SCORED:
            pool.update(concerns_of(c.human_response))
    f += [f"pool:{c}" for c in pool]
    f += [f"pool2:{c}" for c, n in pool.items() if n >= 2]
    return f


def hashed(fs: list[str]) -> np.ndarray:
    return np.unique(np.fromiter((zlib.crc32(s.encode()) % DIM for s in fs), dtype=np.int64))


class ConcernModel:
    """Per concern label, a logistic residual over the base rate's log-odds."""

    def __init__(self, rate: float = RATE) -> None:
        self.rate = rate
        self.w: dict[str, np.ndarray] = {}
        self.count: Counter[str] = Counter()
        self.n = 0

    def base(self, label: str) -> float:
        return (self.count[label] + 0.5) / (self.n + 1.0)

    def predict(self, labels, x: np.ndarray | None) -> dict[str, float]:
        out = {}
        for c in labels:
            p0 = self.base(c)
            z = math.log(p0 / (1 - p0)) if p0 < 1 else 5.0
            if x is not None and c in self.w:
                z += float(self.w[c][x].sum()) / math.sqrt(max(len(x), 1))
            out[c] = 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))
        return out

    def update(self, labels, x: np.ndarray | None, human: set[str]) -> None:
        p = self.predict(labels, x)
        if x is None:  # the base rate: counts only
            labels = ()
        scale = 1.0 / math.sqrt(max(len(x), 1)) if x is not None else 0.0
        for c in labels:
            w = self.w.setdefault(c, np.zeros(DIM))
            g = self.rate * ((c in human) - p[c]) * scale
            w[x] = w[x] * (1 - L2) + g
        self.count.update(human)
        self.n += 1


def cover(items, cand_sets, p: dict[str, float], k: int = DEFAULT_K, budget: int = DEFAULT_BUDGET) -> set[str]:
    """Greedy expected-F1 choice: the items whose joined concerns maximise
    2*sum p / (E|human| + |raised|), E|human| = sum of all p."""
    expect = sum(p.values())
    chosen: set[str] = set()
    best, used, n = 0.0, 0, 0
    while n < k:
        pick, pick_f = None, best
        for it, cs in zip(items, cand_sets, strict=True):
            if used + len(it.text) > budget or not cs - chosen:
                continue
            new = chosen | cs
            f = 2 * sum(p.get(c, 0.0) for c in new) / (expect + len(new))
            if f > pick_f:
                pick, pick_f = (it, cs), f
        if pick is None:
            break
        chosen |= pick[1]
        used += len(pick[0].text)
        best, n = pick_f, n + 1
    return chosen


def rerank(items, cand_sets, p: dict[str, float]) -> set[str]:
    order = sorted(
        range(len(items)), key=lambda i: -(items[i].score + ALPHA * sum(p.get(c, 0.0) for c in cand_sets[i]))
    )
    top = select([items[i] for i in order])
    keep = {id(t) for t in top}
    return set().union(*(cand_sets[i] for i in order if id(items[i]) in keep))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rates", type=float, nargs="+", default=[RATE], help="the model's SGD steps to compare")
    ap.add_argument("--cache", type=Path, nargs="*", help="pickle of the captured contexts (written when absent)")
    args = ap.parse_args()
    if args.cache and all(c.exists() for c in args.cache):
        data = {}
        for c in args.cache:  # several streams' caches: scored together, pooled over all
            data.update(pickle.loads(c.read_bytes()))
    else:
        data = capture(args.files, args.seed)
        if args.cache:
            args.cache[0].write_bytes(pickle.dumps(data))
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    times: list[float] = []
    loss: dict[str, list[float]] = defaultdict(list)  # mean binary log-loss over the labels, per event
    for reviewer, rows in data.items():
        themes, names = Themes(), (reviewer,)
        base, models = ConcernModel(), {r: ConcernModel(r) for r in args.rates}
        for e, seen in rows:
            if seen is not None:
                now = themes.current()

                def concerns_of(text: str, now=now) -> set[str]:
                    return themes.concerns(strip_tags(text, names), now)

                human = concerns_of(e.response)
                ctx, request, artifact = seen
                items = rank(ctx, request, artifact)
                cand_sets = [concerns_of(it.text) for it in items]
                labels = [*CATEGORIES, *(f"theme:{w}" for w in sorted(now))]
                t0 = time.perf_counter()
                x = hashed(features(e, ctx, concerns_of))
                pms = {r: m.predict(labels, x) for r, m in models.items()}
                times.append((time.perf_counter() - t0) / len(models))
                pb = base.predict(labels, None)
                shipped = select(items)
                add = tallies
                add["shipped pre-review top 4"][reviewer].add(
                    human, set().union(*(concerns_of(t.text) for t in shipped))
                )
                add["oracle 4"][reviewer].add(human, oracle(human, cand_sets))
                add["base rate: rerank"][reviewer].add(human, rerank(items, cand_sets, pb))
                add["base rate: cover"][reviewer].add(human, cover(items, cand_sets, pb))
                # the labels alone, as if they could be written (no sentences): does the model rank them?
                add["base rate: top 3 labels (no text)"][reviewer].add(human, set(sorted(pb, key=lambda c: -pb[c])[:3]))
                for r, pm in pms.items():
                    tag = "model" if len(models) == 1 else f"model rate {r}"
                    add[f"{tag}: rerank"][reviewer].add(human, rerank(items, cand_sets, pm))
                    add[f"{tag}: cover"][reviewer].add(human, cover(items, cand_sets, pm))
                    add[f"{tag}: top 3 labels (no text)"][reviewer].add(
                        human, set(sorted(pm, key=lambda c: -pm[c])[:3])
                    )
                for name, pp in (("base rate", pb), *((f"model rate {r}", pm) for r, pm in pms.items())):
                    loss[name].append(-sum(math.log(pp[c] if c in human else 1 - pp[c]) for c in labels) / len(labels))
                base.update(labels, None, human)
                for m in models.values():
                    m.update(labels, x, human)
            themes.add(e.action.value, strip_tags(e.response, names))
    for label in tallies:
        pooled = Tally()
        for reviewer, t in tallies[label].items():
            print(f"{label:32s} {reviewer:22s} ev {t.events:5d} {t.row()}")
            for f in ("hit", "said", "raised", "events"):
                setattr(pooled, f, getattr(pooled, f) + getattr(t, f))
        print(f"{label:32s} {'pooled':22s} ev {pooled.events:5d} {pooled.row()}")
    for name, ls in loss.items():
        half = len(ls) // 2
        print(f"log-loss per label, {name}: {np.mean(ls):.4f} (first half {np.mean(ls[:half]):.4f}, ", end="")
        print(f"second half {np.mean(ls[half:]):.4f})")
    ms = np.array(times) * 1000
    print(f"model features+predict per gate: p50 {np.median(ms):.2f} ms p90 {np.percentile(ms, 90):.2f} ms")


if __name__ == "__main__":
    main()
