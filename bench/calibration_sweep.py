"""One calibration mechanism swept in the replay (online, no peeking): the shipped
default with one switch of the evaluation profile (vicar/eval/profile.py) changed, in one
run on the full dev data.

Against the first value (the mechanism off, by convention), each row reports the
autonomous errors avoided (wrong answers given alone there, not here) and the autonomy
lost (right answers given alone there, not here), plus what the trust ledger and the
censors did: regrets found (and how many of them the reviewer's own answer confirms
wrong), and gates a censor withheld that would otherwise have been answered alone.

    python -m bench.calibration_sweep --param probation_answers --values 0,1,3,5,10 \
        [--limit N] [--out bench/PROBATION_RESULTS.md]
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from bench.dev_replay import load_dev
from bench.machine_info import command_line, machine_line
from vicar.eval import metrics as m
from vicar.eval.profile import EvalProfile
from vicar.eval.replay import Variant, replay_reviewer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--section",
        default="calibration",
        choices=("calibration", "facts"),
        help="the settings the field belongs to (read from the evaluation profile now; kept so recorded commands run)",
    )
    ap.add_argument("--param", default="probation_answers")
    ap.add_argument("--values", default="0,1,3,5,10", help="comma-separated; the first is the baseline")
    ap.add_argument(
        "--baseline",
        default="",
        help="FIELD=VALUE: the first row is the default with this instead (the mechanism off), then one row per value",
    )
    ap.add_argument("--title", default="", help="the report's heading")
    ap.add_argument("--limit", type=int, default=0, help="gates per reviewer (0: all)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    started = datetime.now(UTC)
    defaults = EvalProfile.shipped()  # the switches a replay may set (vicar/eval/profile.py)
    if args.param not in defaults:
        ap.error(f"--param: the evaluation profile has no switch {args.param!r}; it has {', '.join(defaults)}")

    def parse(field: str, value: str) -> object:
        default = defaults[field]
        if isinstance(default, bool):
            return value.lower() in ("1", "true", "yes")
        return float(value) if isinstance(default, float) else int(value)

    rows = {v: {args.param: parse(args.param, v)} for v in args.values.split(",")}
    if args.baseline:
        field, value = args.baseline.split("=", 1)
        rows = {f"off ({args.baseline})": {field: parse(field, value)}, **rows}
    bounds = list(rows)
    console = Console(stderr=True)
    settings, events, embedder = load_dev(args.limit, console)
    agents = {r: len({e.author() for e in evs}) for r, evs in events.items()}
    named = sum(1 for evs in events.values() for e in evs if e.author())

    # Per value, per gate (reviewer, seq): (alone, right).
    outcome: dict = {}
    scores: dict = {}
    for k in bounds:
        variant = Variant(name=f"{args.param}={k}", predictor="learned", profile=EvalProfile.model_validate(rows[k]))
        preds_by_reviewer = {}
        with console.status(f"replaying with {args.param} {k} ..."):
            for r, evs in events.items():
                preds_by_reviewer[r] = replay_reviewer(evs, variant, embedder, settings)
        preds = [p for ps in preds_by_reviewer.values() for p in ps]
        outcome[k] = {
            (r, p.seq): (p.autonomous, p.predicted == p.actual) for r, ps in preds_by_reviewer.items() for p in ps
        }
        alone = [p for p in preds if p.autonomous]
        regrets = [p for p in preds if p.regretted]
        censored = [p for p in preds if p.fired == ["censor"]]  # alone but for the censor
        scores[k] = dict(
            f1=m.macro_f1(preds),
            share=len(alone) / len(preds),
            err=(1 - m.accuracy(alone)) if alone else None,
            regrets=len(regrets),
            regrets_wrong=sum(1 for p in regrets if not p.correct),
            censored=len(censored),
            censored_wrong=sum(1 for p in censored if not p.correct),
        )
        console.print(f"{args.param} {k}: macro-F1 {scores[k]['f1']:.3f}, autonomy {scores[k]['share']:.3f}")

    base = outcome[bounds[0]]
    total = len(base)
    lines = [
        f"# {args.title or args.param}: replay sweep",
        "",
        f"Command: `{command_line()}` (started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()}. Dev data: {total} gates, {named} naming an upstream agent (the patch "
        f"author); distinct agents per reviewer: " + ", ".join(f"{r} {n}" for r, n in agents.items()) + ".",
        "",
        f"Each row is the shipped default with only `{args.param}` changed. Against the first row: autonomous "
        "errors avoided (wrong answers given alone there, not here) and autonomy lost (right answers given "
        "alone there, not here). Regrets: answers given alone that a later human correction or rejection "
        "on the same lineage reversed (found online), and how many of them the reviewer's own answer to that "
        "gate shows were wrong. Censored: gates only a censor kept from being answered alone, and how many of "
        "those the predicted action had wrong (the rest are the censors' false positives).",
        "",
        f"| {args.param} | macro-F1 | autonomy | autonomous error | errors alone | errors avoided | "
        "right answers lost | regrets (wrong) | censored (wrong) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in bounds:
        s = scores[k]
        errors = sum(1 for alone, right in outcome[k].values() if alone and not right)
        avoided = sum(1 for g, (alone, right) in base.items() if alone and not right and not outcome[k][g][0])
        lost = sum(1 for g, (alone, right) in base.items() if alone and right and not outcome[k][g][0])
        err = "—" if s["err"] is None else f"{s['err']:.3f}"
        lines.append(
            f"| {k} | {s['f1']:.3f} | {s['share']:.3f} | {err} | {errors} | {avoided} | {lost} | "
            f"{s['regrets']} ({s['regrets_wrong']}) | {s['censored']} ({s['censored_wrong']}) |"
        )
    lines.append("")
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
