"""The replay report: markdown, PNG plots and the terminal summary."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from vicar.eval.metrics import MAX_AUTONOMOUS_ERROR
from vicar.eval.run import VariantResult
from vicar.eval.team_report import team_section
from vicar.eval.words import BASELINES, FOR_ACTION, MATCH_THRESHOLD, PREREVIEW, PREREVIEW_LEARNED, WordScores

COLUMNS = (
    "variant",
    "gates",
    "accuracy",
    "macro-F1",
    "Brier",
    "ECE",
    "autonomy",
    "auton. error",
    "bound coverage",
    "max autonomy (err≤5%)",
    "concern F1 (R / P)",
    "sentence R@5",
    "text sim (diag.)",
    "gates/s",
    "LLM $",
)


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _row(r: VariantResult, scores=None) -> list[str]:
    o = scores or r.overall
    return [
        r.variant.name,
        str(o.gates),
        _f(o.accuracy),
        _f(o.macro_f1),
        _f(o.brier),
        _f(o.ece),
        _f(o.autonomy.share),
        _f(o.autonomy.error),
        _f(o.autonomy.coverage),
        _f(o.autonomy.best_share),
        *_words_cells(o.words),
        f"{r.gates_per_second:.0f}",
        f"{o.cost_usd:.4f}" if o.cost_usd else "—",
    ]


def _words_cells(w: WordScores | None) -> list[str]:
    if w is None:
        return ["—"] * 3
    return [f"{_f(w.f1)} ({_f(w.recall)} / {_f(w.precision)})", _f(w.sentence_recall), _f(w.text_sim)]


WORDS_COLUMNS = (
    "words of",
    "reviewer",
    "events",
    "recall",
    "precision",
    "F1",
    "raised / event (human)",
    "sentence R@5",
    "sentence P@5",
    "text sim (diag.)",
)


def words_section(results: list[VariantResult]) -> str:
    """The words headline per variant beside its baselines, pooled, as the mean over
    reviewers and per reviewer (vicar/eval/words.py)."""
    rows = []
    labels = [(r.variant.name, r.words["proxy"]) for r in results if "proxy" in r.words]
    labels += [(f"{r.variant.name}: {FOR_ACTION}", r.words[FOR_ACTION]) for r in results if FOR_ACTION in r.words]
    for name in (PREREVIEW, PREREVIEW_LEARNED):
        labels += [(f"{r.variant.name}: {name}", r.words[name]) for r in results if name in r.words]
    floors = results[0].words if results else {}
    labels += [(name, floors[name]) for name in BASELINES if name in floors]
    for label, w in labels:
        people = list(w.per_reviewer.items()) if len(w.per_reviewer) <= MANY_REVIEWERS else []
        for rev, sc in [("all (pooled)", w.pooled), ("mean over reviewers", w.mean), *people]:
            rows.append(
                [
                    label,
                    rev,
                    str(sc.events),
                    _f(sc.recall),
                    _f(sc.precision),
                    _f(sc.f1),
                    f"{sc.raised:.1f} ({sc.human_raised:.1f})",
                    _f(sc.sentence_recall),
                    _f(sc.sentence_precision),
                    _f(sc.text_sim),
                ]
            )
    return (
        "\n## Words: the concerns the human raised (correct/reject events)\n\n"
        + _md_table(WORDS_COLUMNS, rows)
        + "\n\nconcerns: the design's eight categories on word boundaries and the reviewer's 20 most "
        "frequent words in past corrections that are at least twice as frequent there as in past approvals "
        "(learned online), after stripping tags, addresses and status lines; recall, precision and F1 are "
        "micro-averaged over a reviewer's events (pooled: over every event). sentence R@5: of the human's "
        "sentences of >= 4 words, the share matched by one of the first 5 predicted sentences at "
        f"all-MiniLM-L6-v2 cosine >= {MATCH_THRESHOLD} (P@5: of those predicted sentences, the share matching "
        "one). text sim: mean cosine of the raw texts, an empty prediction scored 0. Baselines are built "
        "online from the reviewer's earlier events only.\n" + _items_line(results)
    )


def _items_line(results: list[VariantResult]) -> str:
    """The pre-review's items per correct/reject event (at most its k)."""
    lines = [
        f"- {r.variant.name}: " + ", ".join(f"{who} {x:.2f}" for who, x in r.prereview_items.items())
        for r in results
        if r.prereview_items
    ]
    return "\npre-review items per correct/reject event:\n\n" + "\n".join(lines) + "\n" if lines else ""


def summary_table(results: list[VariantResult]) -> Table:
    table = Table(title="Replay: all reviewers")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in results:
        table.add_row(*_row(r))
    return table


def _md_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


CEILING_COLUMNS = (
    "variant",
    "reviewer",
    "gates",
    "alone",
    "error alone",
    "worst stretch (n, >7.5%)",
    "check coverage (checks)",
    "within target",
    "within noise",
    "ceiling per stretch",
    "ceiling fixed",
    "of ceiling",
    "human load",
    "ECE",
)


def ceiling_section(results: list[VariantResult]) -> str:
    """Per reviewer: the realized autonomy against the hindsight ceiling, the stretches,
    the bound's coverage at each check and the human's load: whether the bound holds
    whenever a person reads it, not only on average, and what the rule leaves them to answer."""
    rows = []
    for r in results:
        for rev, sc in [*_people(r), ("all", r.overall)]:
            a = sc.autonomy
            rows.append(
                [
                    r.variant.name,
                    rev,
                    str(sc.gates),
                    _f(a.share),
                    _f(a.error),
                    f"{_f(a.worst_stretch)} ({a.stretches}, {a.stretches_over})",
                    f"{_f(a.check_coverage)} ({a.checks})",
                    _f(a.target_coverage),
                    _f(a.noise_coverage),
                    _f(a.ceiling),
                    _f(a.ceiling_fixed),
                    _f(a.of_ceiling),
                    _f(a.load),
                    _f(sc.ece),
                ]
            )
    return (
        "\n## Autonomy against its ceiling (per reviewer)\n\n"
        + _md_table(CEILING_COLUMNS, rows)
        + "\n\nworst stretch: the highest error alone in a 1,000-gate stretch of the reviewer's history with "
        "at least 30 answers alone (n: such stretches; >7.5%: how many ran above 7.5%); check coverage: of "
        "the gates where the rule stated a bound and the next 500 gates held at least 30 answers alone, the "
        "share where their error was within the bound stated there (within target: within the target; within "
        "noise: their count of errors one that answers erring at the bound's rate reach with probability above "
        "5%); "
        "ceiling per stretch: in hindsight, the best threshold "
        "chosen per 1,000 gates with error <= 5% in each; ceiling fixed: one threshold for the whole history; "
        "human load: escalations and audits, as a share of gates.\n"
    )


MANY_REVIEWERS = 12  # beyond this many, the per-reviewer rows are left to results.json


def _people(r: VariantResult) -> list:
    return list(r.per_reviewer.items()) if len(r.per_reviewer) <= MANY_REVIEWERS else []


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def separation_section(results: list[VariantResult], target: float) -> str:
    """Per reviewer and pooled: how well the score separates right from wrong, the
    one-tap share beside the pre-fill baseline, and the contexts whose answers alone ran
    above the target."""
    rows, over = [], []
    for r in results:
        for rev, sc in [*_people(r), ("all", r.overall)]:
            sep = sc.separation
            if sep is None:
                continue
            rows.append(
                [
                    r.variant.name,
                    rev,
                    _f(sep.auroc),
                    f"{_f(sep.auprc)} ({_f(sep.base_rate)})",
                    _pct(sep.one_tap),
                    _pct(sep.prefill_one_tap),
                    str(sum(c.error > target for c in sep.contexts)),
                ]
            )
            if rev != "all":
                over += [
                    [r.variant.name, rev, c.task_type, str(c.alone), _pct(c.error), f"{c.error / target:.1f}"]
                    for c in sep.contexts
                    if c.error > target
                ]
    columns = ["variant", "reviewer", "AUROC", "AUPRC (base rate)", "one-tap", "pre-fill one-tap", "contexts > target"]
    text = "\n## What the score knows (per reviewer)\n\n" + _md_table(columns, rows)
    text += (
        "\n\nAUROC, AUPRC: of the predictor's score for \"the proposed action is the person's\" (AUPRC beside its "
        "base rate, the share right); one-tap: gates answered alone plus escalated gates whose suggested answer "
        "was the person's and needs no words (not `correct`); pre-fill one-tap: the same for the person's most "
        f"frequent action so far; contexts > target: task types with >= 10 answers alone whose error ran above "
        f"{target:g}.\n"
    )
    if over:
        text += "\n" + _md_table(["variant", "reviewer", "task type", "alone", "error", "× target"], over) + "\n"
    return text


def markdown(results: list[VariantResult], command: str, files: list[Path], extra: str = "") -> str:
    seeds = sorted({r.variant.seed for r in results})
    drawn = (
        f"Seed: {', '.join(map(str, seeds))} (the activation noise and audit draws)\n" if seeds != [0] and seeds else ""
    )
    parts = [
        f"# Replay evaluation\n\nCommand: `{command}`\n",
        drawn,
        "## All reviewers\n",
        _md_table(COLUMNS, [_row(r) for r in results]),
    ]
    reviewers = list(results[0].per_reviewer) if results else []
    if len(reviewers) > MANY_REVIEWERS:  # a team of people: per person in results.json only
        parts.append(f"\n{len(reviewers)} reviewers: the per-reviewer figures are in results.json.\n")
        reviewers = []
    for rev in reviewers:
        parts += [f"\n## {rev}\n", _md_table(COLUMNS, [_row(r, r.per_reviewer[rev]) for r in results])]
    parts.append("\n## Per-class F1 (all reviewers)\n")
    classes = list(results[0].overall.per_class_f1) if results else []
    parts.append(
        _md_table(
            ["variant", *classes],
            [[r.variant.name, *(_f(r.overall.per_class_f1[c]) for c in classes)] for r in results],
        )
    )
    parts.append("\n## Autonomy against history (all reviewers, per 1,000 gates of each one's history)\n")
    spans = max((r.overall.autonomy.by_history for r in results), key=len, default=[])
    parts.append(
        _md_table(
            ["variant", *(f"gates {w['start'] + 1}–{w['end']}" for w in spans)],
            [
                [r.variant.name, *(f"{_f(w['share'])} (err {_f(w['error'])})" for w in r.overall.autonomy.by_history)]
                for r in results
            ],
        )
    )
    parts.append(team_section(results))
    parts.append(words_section(results))
    parts.append(ceiling_section(results))
    parts.append(separation_section(results, MAX_AUTONOMOUS_ERROR))
    parts.append("\n## Surprise calibration\n")
    parts.append(
        _md_table(
            ["variant", "surprises", "confirmed by the answer", "percept in the human's words"],
            [
                [
                    r.variant.name,
                    str(r.overall.surprise.surprises),
                    _f(r.overall.surprise.confirmed),
                    _f(r.overall.surprise.percepts_in_response),
                ]
                for r in results
            ],
        )
    )
    parts.append(
        "\nDefinitions: confidence is the calibrated confidence that the predicted action is right "
        "(no prediction = confidence 0, counted wrong). autonomy = realized share of gates answered "
        "alone, online: the proxy variants by the autonomy rule (a threshold proven by the betting confidence "
        "sequence over the graded answers so far, valid whenever read, target 5% error at δ 0.05, 5% of those "
        "gates audited; a gate "
        "answered alone is stored as the proxy's answer and gives the rule no evidence), the baselines "
        "(majority, ema-gate: no rule) and the `@0.8` variants (the old fixed threshold, no rule) "
        "at confidence ≥ 0.8; auton. error = realized error rate of those "
        "answers; bound coverage = of the windows of the next 500 autonomous answers starting at each one "
        "(per reviewer; fewer: one window of all), the share whose error stayed ≤ 5%; max autonomy = in "
        "hindsight, the largest share answerable alone at any one threshold with error ≤ 5%. "
        "`default` is what the product ships (the learned model, the memory vote until its first fit, + the rule); "
        "`composite` is the memory vote alone + the rule. concern F1 (R / P), sentence R@5 and text "
        "sim: the words on correct/reject events (see Words below). Surprise is confirmed when the "
        "confidence moved up and the prediction was right, or down and it was wrong.\n"
    )
    if extra:
        parts.append(extra)
    if files:
        parts.append("\n## Plots\n\n" + "\n".join(f"![{f.stem}]({f.name})" for f in files) + "\n")
    return "\n".join(parts)


def write_gates(results: list[VariantResult], out: Path) -> list[Path]:
    """Per variant, `gates-<variant>.jsonl.gz`: one GateRow a line, for rule simulations."""
    import gzip

    files = []
    for r in results:
        path = out / f"gates-{r.variant.name.replace('/', '_')}.jsonl.gz"
        with gzip.open(path, "wt") as f:
            f.writelines(g.model_dump_json() + "\n" for g in r.gates)
        files.append(path)
    return files


def plots(results: list[VariantResult], out: Path) -> list[Path]:
    """NotInstalled without the `eval` extra (matplotlib)."""
    from vicar.memory.optional import require

    matplotlib = require("matplotlib", "eval", "the replay report's plots")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    # One panel per reviewer: each has a fresh memory, so their curves are not one stream.
    reviewers = list(results[0].per_reviewer) if results else []
    cols = min(3, max(1, len(reviewers)))
    rows = max(1, -(-len(reviewers) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, reviewer in zip(axes.flat, reviewers):
        for r in results:
            curve = r.per_reviewer[reviewer].curve
            ax.plot([c["end"] for c in curve], [c["macro_f1"] for c in curve], marker=".", label=r.variant.name)
        ax.set(title=f"{reviewer}: macro-F1 per tenth of their gates", xlabel="gates replayed", ylabel="macro-F1")
    for ax in list(axes.flat)[len(reviewers) :]:
        ax.axis("off")
    if reviewers:
        axes.flat[0].legend(fontsize=7)
    files.append(_save(fig, out / "learning_curve.png"))

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    for r in results:
        xy = [
            (b.confidence, b.accuracy)
            for b in r.overall.reliability
            if b.count and b.confidence is not None and b.accuracy is not None
        ]  # an empty bin has neither
        ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=r.variant.name)
    ax.set(title="Reliability diagram", xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7)
    files.append(_save(fig, out / "reliability.png"))

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for r in results:
        pts = r.overall.autonomy_curve
        ax.plot([p[1] for p in pts], [p[2] for p in pts], marker=".", label=r.variant.name)
    ax.axhline(0.05, color="red", lw=1, ls=":", label="5% error")
    ax.set(
        title="Autonomy vs error (threshold 1 → 0)",
        xlabel="share decided alone",
        ylabel="error of those decisions",
        xlim=(0, 1),
        ylim=(0, 1),
    )
    ax.legend(fontsize=7)
    files.append(_save(fig, out / "autonomy_error.png"))
    return files


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
