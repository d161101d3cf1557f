"""Probation of upstream agents, swept in the replay (online, no peeking): the shipped
default against probation off and other bounds, in one run on the full dev data.

Each variant is the product's default (learned predictor, autonomy rule) with only
`probation_answers` changed. Against probation off, it reports the autonomous errors
avoided (wrong answers the proxy gave alone without probation and does not give with
it) and the autonomy lost (right answers alone it no longer gives).

    python bench/probation_sweep.py [--bounds 0,1,3,5,10] [--limit N] [--out bench/PROBATION_RESULTS.md]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from machine_info import machine_line  # noqa: E402  (bench/ is on sys.path when run as a script)
from vicar.config import Settings  # noqa: E402
from vicar.eval.dataset import load_events  # noqa: E402
from vicar.eval.replay import Variant, replay_reviewer  # noqa: E402
from vicar.eval.run import warm_embeddings  # noqa: E402
from vicar.eval import metrics as m  # noqa: E402
from vicar.memory.embedder import make_embedder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "datasets" / "gate-replay" / "dev"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bounds", default="0,1,3,5,10")
    ap.add_argument("--limit", type=int, default=0, help="gates per reviewer (0: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "PROBATION_RESULTS.md")
    args = ap.parse_args()
    started = datetime.now(timezone.utc)
    bounds = [int(b) for b in args.bounds.split(",")]
    console = Console(stderr=True)
    settings = Settings.from_env()
    events = load_events(sorted(DEV.glob("*.jsonl.gz")))
    if args.limit:
        events = {r: evs[: args.limit] for r, evs in events.items()}
    embedder = make_embedder(cache_file=settings.embedding_cache)
    warm_embeddings(events, embedder, console)
    agents = {r: len({e.author() for e in evs}) for r, evs in events.items()}
    named = sum(1 for evs in events.values() for e in evs if e.author())

    # Per bound, per gate (reviewer, seq): (alone, right).
    outcome: dict[int, dict[tuple[str, int], tuple[bool, bool]]] = {}
    scores: dict[int, tuple[float, float, float | None]] = {}
    for k in bounds:
        variant = Variant(name=f"probation={k}", predictor="learned", calibration={"probation_answers": k})
        preds_by_reviewer = {}
        with console.status(f"replaying with probation {k} ..."):
            for r, evs in events.items():
                preds_by_reviewer[r] = replay_reviewer(evs, variant, embedder, settings)
        preds = [p for ps in preds_by_reviewer.values() for p in ps]
        outcome[k] = {(r, p.seq): (p.autonomous, p.predicted == p.actual)
                      for r, ps in preds_by_reviewer.items() for p in ps}
        alone = [p for p in preds if p.autonomous]
        scores[k] = (m.macro_f1(preds), len(alone) / len(preds),
                     (1 - m.accuracy(alone)) if alone else None)
        console.print(f"probation {k}: macro-F1 {scores[k][0]:.3f}, autonomy {scores[k][1]:.3f}")

    base = outcome[0] if 0 in outcome else None
    total = len(next(iter(outcome.values())))
    lines = [
        "# Probation of upstream agents: replay sweep",
        "",
        f"Command: `{shlex.join(['python', 'bench/probation_sweep.py', *sys.argv[1:]])}` "
        f"(started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()}. Dev data: {total} gates, {named} naming an upstream agent (the patch "
        f"author); distinct agents per reviewer: " + ", ".join(f"{r} {n}" for r, n in agents.items()) + ".",
        "",
        "Each row is the shipped default with only `probation_answers` changed; 0 is probation off. "
        "Against it: autonomous errors avoided (wrong answers given alone at 0, not given here) and "
        "autonomy lost (right answers given alone at 0, not given here).",
        "",
        "| probation | macro-F1 | autonomy | autonomous error | errors alone | errors avoided | right answers lost |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in bounds:
        f1, share, err = scores[k]
        errors = sum(1 for alone, right in outcome[k].values() if alone and not right)
        if base is not None:
            avoided = sum(1 for g, (alone, right) in base.items() if alone and not right and not outcome[k][g][0])
            lost = sum(1 for g, (alone, right) in base.items() if alone and right and not outcome[k][g][0])
        else:
            avoided = lost = None
        lines.append(f"| {k} | {f1:.3f} | {share:.3f} | {'—' if err is None else f'{err:.3f}'} | {errors} | "
                     f"{'—' if avoided is None else avoided} | {'—' if lost is None else lost} |")
    lines.append("")
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
