"""The selector (bench/score/selector.py) over the dev replay, prequential: AUROC gain
per reviewer, ECE, the ablation, and the autonomy the shipped rule gets from it.

Two modes, both online (each gate scored before its answer, the model refitted every
N labelled answers on what came before):
- `auroc`: every earlier gate's answer is known (as in `never-alone`): the score's
  separating power, per reviewer, seeds = the fit's bagging seeds;
- `autonomy`: coupled with the shipped rule (bench/score/simulate.py): the selector
  scores the gate, the rule decides, and only a gate the person answered (escalated or
  audited) teaches the selector: an answer alone is never labelled.

    sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.run_selector auroc --seeds 0 1 2 3 4
    sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.run_selector ablation \
        --reviewers "Guenter Roeck"
    sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.run_selector autonomy --seeds 0 1 2 3 4

Until the selector's first fit a gate keeps the predictor's score.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.score import simulate as sim
from bench.score.common import DUMP, TUNED_ON, gate_key, joined, load_events, load_gates
from bench.score.measure import auprc, auroc, ece
from bench.score.selector import GROUPS, Gate, Selector, SelectorParams, artifact_features


def author(e: dict) -> str | None:
    """The upstream agent as the replay names it (vicar.eval.dataset.GateEvent.author)."""
    from vicar.eval.dataset import GateEvent

    return GateEvent.model_validate(e).author()


def lineage(title: str) -> str:
    from vicar.proxy.lineage import derive

    return derive(title).lineage if title else ""


def load(seed: int = 0, path: Path | None = None) -> dict[str, dict]:
    """Per reviewer: the gates as the selector sees them, with the recorded stream."""
    path = path or Path(str(DUMP).format(seed=seed))
    data = joined(load_gates(path), load_events())
    vectors = _vectors()
    out = {}
    for r, pairs in data.items():
        gates = []
        vecs = vectors.get(r)
        for i, (g, e) in enumerate(pairs):
            base = Gate(
                task_type=e["task_type"],
                title=e.get("artifact_title", ""),
                text=e.get("artifact_text", ""),
                agent=author(e),
                lineage=lineage(e.get("artifact_title", "")),
            )
            gates.append(
                replace(
                    base,
                    # Records without the proposed action (bench/replay/gates-*.jsonl.gz): one
                    # placeholder for every gate with a score, which tells the selector nothing.
                    action=g["predicted"] if "predicted" in g else (None if g["score"] is None else "?"),
                    score=g["score"],
                    probs=g.get("probs"),
                    artifact=artifact_features(base),
                    vector=vecs[i] if vecs is not None and vecs[i].any() else None,
                )
            )
        out[r] = dict(
            gates=gates,
            actual=[e["action"] for _, e in pairs],
            score=np.array([np.nan if g["score"] is None else g["score"] for g, _ in pairs], float),
            right=np.array([g["correct"] for g, _ in pairs], bool),
            task=np.array([e["task_type"] for _, e in pairs]),
            gate_id=[gate_key(e) for _, e in pairs],
        )
    return out


def _vectors() -> dict[str, np.ndarray]:
    """The artifact vectors (vectors.py), when they were extracted; else none (the
    "similar" features are then missing)."""
    try:
        from bench.score.vectors import path

        with np.load(path()) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ImportError):
        print("# no artifact vectors: the similar-work features are missing", file=sys.stderr)
        return {}


def prequential(d: dict, params: SelectorParams, groups=None) -> np.ndarray:
    """Every answer known: the selector's score per gate (the predictor's until its first fit)."""
    sel = Selector(params, groups)
    out = d["score"].copy()
    for i, g in enumerate(d["gates"]):
        c = sel.confidence(g)
        if c is not None and not np.isnan(out[i]):
            out[i] = c
        sel.observe(g, d["actual"][i], bool(d["right"][i]))
    return out


class Coupled:
    """The selector as a simulate.Scores: it learns only the answers the rule lets it see."""

    def __init__(self, d: dict, params: SelectorParams, groups=None) -> None:
        self.d, self.sel = d, Selector(params, groups)

    def score(self, i: int) -> float:
        s = self.d["score"][i]
        c = self.sel.confidence(self.d["gates"][i])
        return s if c is None or np.isnan(s) else c

    def observe(self, i: int, labelled: bool) -> None:
        self.sel.observe(self.d["gates"][i], self.d["actual"][i] if labelled else None, bool(self.d["right"][i]))


def shown(scores: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The confidence the person would be shown for each score: the product's Platt map
    (vicar.proxy.recalibration.Recalibrator, latest 2,000 pairs, refitted every 50)
    fitted on the pairs before the gate, every gate a pair (as in `never-alone`)."""
    from vicar.proxy.recalibration import Recalibrator
    from vicar.proxy.recalibration import shown as show

    recal = Recalibrator(2000)
    out = np.full(len(scores), np.nan)
    for i, (sc, ok) in enumerate(zip(scores, right)):
        if np.isnan(sc):
            continue
        out[i] = show(float(sc), recal.map)
        recal.extend([(i + 1, float(sc), bool(ok))])
    return out


def figures(scores: np.ndarray, right: np.ndarray) -> dict:
    from vicar.eval.metrics import hindsight_ceiling

    per, fixed = hindsight_ceiling([None if np.isnan(x) else float(x) for x in scores], list(right))
    return dict(
        ceiling=per,  # hindsight: the best threshold per 1,000 gates at <= 5% error
        fixed=fixed,  # hindsight: one threshold for the whole history
        auroc=auroc(scores, right),
        auprc=auprc(scores, right),
        ece=ece(scores, right),
        ece_shown=ece(shown(scores, right), right),
    )


def stream_for(args, data: dict, seed: int) -> dict:
    """Seed k's stream: the replay of seed k with --per-seed-streams (when dumped), else the one loaded."""
    if not getattr(args, "per_seed_streams", False) or seed == args.replay_seed:
        return data
    d = load(seed)
    return {r: x for r, x in d.items() if r in data}


def cmd_auroc(args, data, params, groups=None, label="selector") -> list[dict]:
    rows = []
    for seed in args.seeds:
        for r, d in stream_for(args, data, seed).items():
            base = figures(d["score"], d["right"])
            start = time.perf_counter()
            s = prequential(d, replace(params, seed=seed), groups)
            rows.append(
                dict(
                    label=label,
                    reviewer=r,
                    seed=seed,
                    base=base,
                    sel=figures(s, d["right"]),
                    seconds=time.perf_counter() - start,
                )
            )
            print(
                f"# {label} {r} seed {seed}: AUROC {base['auroc']:.3f} -> {rows[-1]['sel']['auroc']:.3f}"
                f" ECE {rows[-1]['sel']['ece']:.3f} ({rows[-1]['seconds']:.0f} s)",
                file=sys.stderr,
            )
    return rows


def auroc_table(rows: list[dict]) -> list[str]:
    lines = [
        "| variant | reviewer | AUROC score | AUROC selector (mean ± sd) | gain | AUPRC score → selector"
        " | ECE score → selector | ECE shown: score → selector | hindsight ≤5% one threshold | per 1,000 gates |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    for label in labels:
        for reviewer in dict.fromkeys(r["reviewer"] for r in rows if r["label"] == label):
            rs = [r for r in rows if r["label"] == label and r["reviewer"] == reviewer]
            a = [r["sel"]["auroc"] for r in rs]
            b = {k: float(np.mean([r["base"][k] for r in rs])) for k in rs[0]["base"]}  # per-seed streams differ
            lines.append(
                f"| {label} | {reviewer}{' (tuned on)' if reviewer == TUNED_ON else ''}"
                f" | {b['auroc']:.3f} ± {np.std([r['base']['auroc'] for r in rs]):.3f}"
                f" | {np.mean(a):.3f} ± {np.std(a):.3f} | {np.mean(a) - b['auroc']:+.3f}"
                f" (min {min(x - r['base']['auroc'] for x, r in zip(a, rs)):+.3f})"
                f" | {b['auprc']:.3f} → {np.mean([r['sel']['auprc'] for r in rs]):.3f}"
                f" | {b['ece']:.3f} → {np.mean([r['sel']['ece'] for r in rs]):.3f}"
                f" | {b['ece_shown']:.3f} → {np.mean([r['sel']['ece_shown'] for r in rs]):.3f}"
                f" | {100 * b['fixed']:.1f}% → {100 * np.mean([r['sel']['fixed'] for r in rs]):.1f}%"
                f" | {100 * b['ceiling']:.1f}% → {100 * np.mean([r['sel']['ceiling'] for r in rs]):.1f}% |"
            )
    return lines


CANDIDATES = {
    "predictor's score": (False, sim.Config()),
    "selector": (True, sim.Config()),
    "predictor's score, stake on labelled": (False, sim.Config(stake="labelled")),
    "selector, stake on labelled": (True, sim.Config(stake="labelled")),
}


def autonomy(args, data: dict, params: SelectorParams) -> None:
    """The shipped rule over each candidate score, per seed: seed k uses the replay of
    seed k (dump_replay.py --seed k) when it exists, the product's audit draws of the
    principal for seed k, and the selector's bagging seed k."""
    results: dict[str, dict[str, list[dict]]] = {c: {} for c in CANDIDATES}
    streams_used = []
    for seed in args.seeds:
        path = Path(str(DUMP).format(seed=seed))
        d_seed = load(seed) if path.exists() and args.gates is None else data
        streams_used.append(str(path) if d_seed is not data else "replay seed 0")
        if args.reviewers:
            d_seed = {r: d for r, d in d_seed.items() if r in args.reviewers}
        for label, (selected, cfg) in CANDIDATES.items():
            if args.candidates and label not in args.candidates:
                continue
            make = (lambda r, d, k: Coupled(d, replace(params, seed=k), args.groups)) if selected else None
            res = sim.run(d_seed, [seed], cfg, make=make, draws=args.draws)
            for r, rows in res.items():
                results[label].setdefault(r, []).extend(rows)
            print(f"# {label} seed {seed} done", file=sys.stderr)
    print(f"Streams: {', '.join(streams_used)}; audit draws: {args.draws}\n")
    lines = list(sim.HEADER)
    for label, res in results.items():
        if res:
            lines += sim.table(label, res)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(results, default=float, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["auroc", "ablation", "autonomy"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--replay-seed", type=int, default=0, help="which dump_replay.py stream")
    ap.add_argument(
        "--gates", type=Path, default=None, help="another stream (e.g. bench/replay/gates-default.jsonl.gz)"
    )
    ap.add_argument("--reviewers", nargs="+", default=None)
    ap.add_argument("--set", nargs="*", default=[], help="SelectorParams overrides, name=value")
    ap.add_argument("--groups", nargs="*", default=None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--draws", choices=["rng", "hash"], default="hash")
    ap.add_argument("--candidates", nargs="*", default=None, help="autonomy: which of CANDIDATES")
    ap.add_argument(
        "--per-seed-streams", action="store_true", help="auroc: seed k on the replay of seed k (dump_replay.py)"
    )
    args = ap.parse_args()
    params = SelectorParams()
    for kv in args.set:
        k, v = kv.split("=", 1)
        params = replace(params, **{k: type(getattr(params, k))(v)})
    data = load(args.replay_seed, args.gates)
    if args.reviewers:
        data = {r: d for r, d in data.items() if r in args.reviewers}
    print(f"SelectorParams: {params}\n", flush=True)
    if args.mode == "auroc":
        rows = cmd_auroc(args, data, params, args.groups)
        print("\n".join(auroc_table(rows)))
    elif args.mode == "ablation":
        variants = [("all", list(GROUPS))]
        variants += [(f"score+{g}", ["score", g]) for g in GROUPS if g != "score"]
        variants += [(f"all-{g}", [x for x in GROUPS if x != g]) for g in GROUPS]
        rows = []
        for label, groups in variants:
            rows += cmd_auroc(args, data, params, groups, label)
        print("\n".join(auroc_table(rows)))
    else:
        autonomy(args, data, params)
        return
    if args.json:
        args.json.write_text(json.dumps(rows, default=float, indent=1))


if __name__ == "__main__":
    main()
