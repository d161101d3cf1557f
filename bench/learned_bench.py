"""The learned predictor, measured: LightGBM vs scikit-learn's HistGradientBoosting.

Prequential on the full dev data, history features only (no memory vote: that needs the
embedded replay, `vicar eval replay ... --variants majority,composite,learned`): each
reviewer's answers in order, the model refitted on the schedule and used until the
next fit exactly as online. Also: fit time at 10,000 answers, one prediction's time,
and ablations. Writes bench/LEARNED_RESULTS.md.

    python -m bench.learned_bench [--data DIR] [--out bench/LEARNED_RESULTS.md]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.machine_info import command_line
from vicar.eval import metrics as m
from vicar.eval.dataset import load_events, principal_for
from vicar.models import AnsweredBy, OutcomeRecord
from vicar.proxy import learned_history as H
from vicar.proxy import learned_model as M

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "gate-replay" / "dev"
FIT_AT = 10_000


def history_of(events) -> H.History:
    principal = principal_for(events[0].reviewer)
    h = H.History()
    for i, e in enumerate(events):
        h.observe(
            OutcomeRecord(
                request=e.request(principal),
                n=i + 1,
                workflow_id=e.gate_id,
                action=e.action,
                response_text=e.response,
                answered_by=AnsweredBy.human,
            )
        )
    return h


def prequential(h: H.History, learner: str, drop: tuple[str, ...] = ()) -> tuple[list[m.Prediction], float]:
    """Each answer predicted by the model fitted at the last scheduled count before it
    (the majority so far until the first fit). Returns predictions and total fit seconds."""
    X = np.vstack(h.rows)
    for name in drop:
        X[:, H.FEATURES.index(name)] = np.nan
    n = len(h.labels)
    points = [k for k in range(1, n + 1) if M.refit_due(k)] + [n]
    preds: list[m.Prediction] = []
    seen: Counter = Counter()
    for i in range(points[0]):
        top = seen.most_common(1)
        preds.append(
            m.Prediction(
                seq=i,
                actual=h.labels[i].value,
                predicted=top[0][0].value if top else None,
                confidence=top[0][1] / i if top else 0.0,
                autonomous=False,
            )
        )
        seen[h.labels[i]] += 1
    fit_seconds = 0.0
    for k, nxt in zip(points, points[1:]):
        if nxt <= k:
            continue
        t = time.perf_counter()
        model = M.fit_rows(X[:k], h.labels[:k], learner)
        fit_seconds += time.perf_counter() - t
        probs = model.proba(X[k:nxt])
        for j, p in enumerate(probs):
            best = int(np.argmax(p))
            preds.append(
                m.Prediction(
                    seq=k + j,
                    actual=h.labels[k + j].value,
                    predicted=model.classes[best].value,
                    confidence=float(p[best]),
                    autonomous=False,
                )
            )
    return preds, fit_seconds


def majority(h: H.History) -> list[m.Prediction]:
    seen: Counter = Counter()
    out = []
    for i, a in enumerate(h.labels):
        top = seen.most_common(1)
        out.append(
            m.Prediction(
                seq=i,
                actual=a.value,
                predicted=top[0][0].value if top else None,
                confidence=top[0][1] / i if top else 0.0,
                autonomous=False,
            )
        )
        seen[a] += 1
    return out


def row(name: str, preds: list[m.Prediction], extra: str = "") -> str:
    return (
        f"| {name} | {len(preds)} | {m.accuracy(preds):.3f} | {m.macro_f1(preds):.3f} | "
        f"{m.brier(preds):.3f} | {m.ece(preds):.3f} |{extra}"
    )


LINEAGE = tuple(
    f
    for f in H.FEATURES
    if f.startswith("last") or f in ("lin_count", "changed", "header_changed", "revision_delta", "since")
)
STRUCTURE = ("revision", "position", "series_size", "cover", "art_chars", "art_lines", "list_lines", "diff_lines")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("LEARNED_RESULTS.md"))
    args = ap.parse_args()
    events = load_events([args.data / "git-whats-cooking.jsonl.gz", args.data / "lkml-hwmon.jsonl.gz"])
    t = time.perf_counter()
    histories = {r: history_of(evs) for r, evs in events.items()}
    build = time.perf_counter() - t
    total = sum(h.n for h in histories.values())
    lines = [
        "# Learned predictor: measurements",
        "",
        f"Command: `{command_line()}` ({total} human answers, {len(histories)} reviewers, "
        f"full dev data; history features only, no memory vote). Building all histories (features of "
        f"every answer, online): {build:.1f} s = {build / total * 1e3:.2f} ms per answer.",
        "",
    ]

    header = ["| predictor | gates | accuracy | macro-F1 | Brier | ECE |", "|---|---|---|---|---|---|"]
    pooled: dict[str, list[m.Prediction]] = {}
    fit_time: dict[str, float] = {}
    sections = []
    for reviewer, h in histories.items():
        sec = [f"### {reviewer}", "", *header]
        maj = majority(h)
        pooled.setdefault("majority", []).extend(maj)
        sec.append(row("majority", maj))
        for learner in ("lightgbm", "sklearn"):
            preds, secs = prequential(h, learner)
            pooled.setdefault(learner, []).extend(preds)
            fit_time[learner] = fit_time.get(learner, 0.0) + secs
            sec.append(row(learner, preds))
            print(reviewer, sec[-1], f"fits {secs:.1f} s", flush=True)
        for label, drop in (("lightgbm − lineage", LINEAGE), ("lightgbm − structure", STRUCTURE)):
            preds, _ = prequential(h, "lightgbm", drop)
            pooled.setdefault(label, []).extend(preds)
            sec.append(row(label, preds))
        sections.append("\n".join(sec))
        print(sections[-1], flush=True)

    lines += ["## All reviewers (pooled)", "", *header]
    lines += [row(k, v) for k, v in pooled.items()]
    lines += [
        "",
        "Total fit time over the whole prequential run (all refits, all reviewers): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in fit_time.items()),
        "",
    ]

    # Fit and predict time, both learners, same run, on the largest history.
    big = max(histories.values(), key=lambda h: h.n)
    X = np.vstack(big.rows[:FIT_AT])
    timing = [
        "## Time",
        "",
        f"Fit on the first {min(FIT_AT, big.n)} answers of the largest history; one "
        "prediction = one feature row built from the history + the model's probabilities "
        "(median of 500 single calls).",
        "",
        "| learner | fit (s) | one prediction (ms) | features only (ms) |",
        "|---|---|---|---|",
    ]
    principal = principal_for(next(r for r, h in histories.items() if h is big))
    reqs = [e.request(principal) for e in events[next(r for r, h in histories.items() if h is big)][:500]]
    for learner in ("lightgbm", "sklearn"):
        t = time.perf_counter()
        model = M.fit_rows(X, big.labels[:FIT_AT], learner)
        fit_s = time.perf_counter() - t
        both, feats = [], []
        for req in reqs:
            t0 = time.perf_counter()
            x = big.features(req)
            t1 = time.perf_counter()
            model.proba(x)
            t2 = time.perf_counter()
            both.append(t2 - t0)
            feats.append(t1 - t0)
        timing.append(f"| {learner} | {fit_s:.2f} | {np.median(both) * 1e3:.2f} | {np.median(feats) * 1e3:.2f} |")
        print(timing[-1], flush=True)
    lines += timing + ["", "## Per reviewer", ""] + [s + "\n" for s in sections]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
