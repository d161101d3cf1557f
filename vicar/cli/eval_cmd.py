"""`vicar eval replay`: real reviewers' gates replayed through the proxy, scored."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from vicar.cli.base import console, eval_app, friendly
from vicar.display import text
from vicar.errors import InvalidInput, NotInstalled, VicarError
from vicar.settings import Settings


@eval_app.command("replay")
@friendly
def eval_replay(
    files: list[Path] = typer.Argument(..., help="gate-replay JSONL files (.jsonl or .jsonl.gz)"),
    out: Path = typer.Option(Path("replay-report"), help="Directory for the report and plots."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many gates per reviewer (the first ones)."),
    variants: Optional[str] = typer.Option(None, help="Comma-separated variant names (default: all)."),
    do_sweep: bool = typer.Option(False, "--sweep", help="First sweep d, tau, s and weights; use the best."),
    predictor: Optional[str] = typer.Option(
        None,
        help="Also replay with an LLM predictor (anthropic | openai): variant composite-<name>. "
        "Paid calls: needs --limit; the estimated cost is printed first.",
    ),
    yes: bool = typer.Option(False, "--yes", help="Do not ask before paid LLM calls."),
    seed: int = typer.Option(
        0,
        min=0,
        max=10**6,
        help="Other draws of the activation noise and the audits: "
        "rerun with a few seeds to see how much a figure moves by chance.",
    ),
) -> None:
    """Replay real reviewers' gates through the proxy and score its predictions."""
    import shlex
    import time

    from vicar.eval.dataset import load_events
    from vicar.eval.replay import LOCAL_PREDICTORS, standard_variants
    from vicar.eval.report import markdown, plots, summary_table, write_gates
    from vicar.eval.run import run_variants, sweep, warm_embeddings
    from vicar.memory.embedder import make_embedder

    settings = Settings.from_env()
    events = load_events(files)
    if not events:
        raise VicarError("no gate events in " + ", ".join(map(str, files)))
    if predictor is not None:
        predictor = predictor.strip().lower()
        if predictor not in ("anthropic", "openai"):
            raise InvalidInput(f"unknown --predictor {predictor!r}; LLM predictors: anthropic, openai")
        if not limit:
            raise InvalidInput("an LLM replay makes paid calls for every gate: give --limit (gates per reviewer)")
    if limit:
        events = {r: evs[:limit] for r, evs in events.items()}
    total = sum(len(v) for v in events.values())
    console.print(
        text(f"{total} gates from {len(events)} reviewers: " + ", ".join(f"{r} ({len(v)})" for r, v in events.items()))
    )
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    seconds = warm_embeddings(events, embedder, console)
    console.print(text(f"embeddings ready in {seconds:.1f} s (cached in {settings.embedding_cache})"))
    extra = ""
    base = None
    if do_sweep:
        best, tried = sweep(events, embedder, settings, console)
        base = best
        extra = (
            "\n## Parameter sweep (macro-F1, coordinate search)\n\n"
            + "\n".join(f"- {', '.join(f'{k}={v}' for k, v in upd.items())}: {score:.4f}" for upd, score in tried)
            + f"\n\nChosen: d={best.decay}, tau={best.threshold}, s={best.noise_s}, "
            f"w_activation={best.w_activation}, w_similarity={best.w_similarity}\n"
        )
    chosen = standard_variants(base)
    if predictor is not None:
        from vicar.eval.cost import estimate_replay_cost
        from vicar.eval.replay import Variant

        chosen.append(Variant(name=f"composite-{predictor}", predictor=predictor, **({"memory": base} if base else {})))
    if variants:
        wanted = [v.strip() for v in variants.split(",") if v.strip()]
        known = {v.name for v in chosen}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise InvalidInput(f"unknown variant(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}")
        chosen = [v for v in chosen if v.name in wanted]
    chosen = [v.model_copy(update={"seed": seed}) for v in chosen]
    if any(v.predictor not in LOCAL_PREDICTORS for v in chosen):
        assert predictor is not None  # the only paid variant is --predictor's
        est = estimate_replay_cost(events, predictor)
        console.print(
            f"LLM replay with {est.provider} ({est.model}, classifier {est.classifier_model}): "
            f"{est.gates} gates, ~{est.input_tokens:,} input and ~{est.output_tokens:,} output tokens, "
            f"estimated cost at most ${est.usd:.2f} (no cache discount counted)",
            markup=False,
        )
        if not yes and not typer.confirm("Make these paid calls?", default=False):
            raise VicarError("LLM replay not started: nothing was called")
    start = time.perf_counter()
    results = run_variants(events, chosen, embedder, settings, console)
    console.print(summary_table(results))
    out.mkdir(parents=True, exist_ok=True)
    try:
        figures = plots(results, out)
    except NotInstalled as exc:  # the report is still worth writing
        figures = []
        console.print(text(f"no plots: {exc}"))
    command = "vicar eval replay " + " ".join(shlex.quote(str(a)) for a in sys.argv[3:])
    (out / "report.md").write_text(markdown(results, command, figures, extra))
    (out / "results.json").write_text(json.dumps([r.model_dump(mode="json") for r in results], indent=1))
    write_gates(results, out)
    console.print(text(f"report: {out / 'report.md'} ({time.perf_counter() - start:.0f} s of replay)"))
