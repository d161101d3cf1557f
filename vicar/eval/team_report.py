"""The replay report's section on teams and the wish to be asked (vicar/eval/team_scores.py)."""

from __future__ import annotations

from vicar.eval.metrics import MAX_AUTONOMOUS_ERROR
from vicar.eval.run import VariantResult
from vicar.eval.team_scores import PERSON_LEAST, PERSON_LIMIT, SUGGEST_RUN

# The permission study's own figures (shared/datasets/permissions/README.md): all 181
# participants, their train/test split, their stream without the ask-first answers.
PAPER = (
    "The study's figures (Wu et al., S&P 2026; all 181 participants, their split, the stream without "
    "the ask-first answers): their LLM + LightGCN hybrid 85.1% on the test decisions (66.9% with no "
    "history of the person); LightGCN alone 83.9%; each person's majority 82%; the other people's "
    "majority on the same app and data type 76%; a population prior with a per-person bias 87–88%."
)

COLUMNS = (
    "variant",
    "test acc. (proposal)",
    "test acc. (alone answer)",
    "gates 2–5",
    "ask AUROC",
    "alone (error)",
    "hindsight alone ≤5% (test)",
    "online rule (test)",
    "online rule (all)",
    f"people >{PERSON_LIMIT:.0%}",
    "plug-in rule (test)",
    "suggested rules: share (error)",
    "supported (lone unsupported)",
)


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def team_section(results: list[VariantResult]) -> str:
    scored = [r for r in results if r.team is not None]
    if not scored:
        return ""
    if not any(r.team and r.team.study for r in scored):
        return rules_section(scored)
    rows = []
    for r in scored:
        t = r.team
        assert t is not None
        rows.append(
            [
                r.variant.name,
                _f(t.test_accuracy),
                _f(t.test_alone_accuracy),
                _f(t.early_accuracy),
                _f(t.ask_auroc),
                f"{_pct(t.alone_share)} ({_pct(t.alone_error)})",
                f"{_pct(t.hindsight_share)} (t {_f(t.hindsight_threshold)})",
                f"{_pct(t.online_share)} ({_pct(t.online_error)})",
                f"{_pct(t.online_all_share)} ({_pct(t.online_all_error)})",
                str(t.online_people_over),
                f"{_pct(t.plugin_share)} ({_pct(t.plugin_error)}; {t.plugin_people_over})",
                f"{t.suggestions}: {_pct(t.suggestion_share)} ({_pct(t.suggestion_error)})",
                f"{_pct(t.supported_share)} ({t.unsupported_alone})",
            ]
        )
    first = scored[0].team
    assert first is not None
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    table = header + "\n".join("| " + " | ".join(row) + " |" for row in rows)
    return (
        "\n## Teams and the wish to be asked\n\n"
        f"{first.people} people, {first.gates} gates; {first.test} test decisions without ask-first "
        f"({first.test_gates} test decisions in all); {first.early} gates 2–5; "
        f"{_pct(first.ask_share)} of the answers ask to be asked first.\n\n"
        + table
        + "\n\ntest acc.: on the `test` decisions without `ask_first` (the study's figure), of the proposal (the "
        "likeliest answer) and of the answer the proxy would give alone (the likeliest given without a wish to "
        "be asked); gates 2–5: the proposal on each person's gates 2–5; ask AUROC: the predicted wish to be "
        "asked against the `ask_first` answers; alone: as the variant's rule answered, a lone answer where the "
        "person wanted to be asked counted as an error; hindsight alone: the largest share of the test decisions "
        f"one threshold on the lone-answer score answers alone at error ≤ {MAX_AUTONOMOUS_ERROR:g} (ask-first "
        "counted as errors); online rule: before each person, the lowest threshold whose lone answers on the "
        "earlier members' gates prove that error (one-sided 95% Clopper–Pearson), used on the person (it reads "
        "the earlier people's every label: in the product the team's lone answers are labelled by audits only); "
        f"people >{PERSON_LIMIT:.0%}: with ≥ {PERSON_LEAST} online lone answers above that error; plug-in rule: the "
        "same with the earlier members' hindsight threshold (no bound), its error and its people above "
        f"{PERSON_LIMIT:.0%}; suggested rules: "
        f"a run of {SUGGEST_RUN} identical answers on one kind of action with no contrary or ask-first answer "
        "there, taken as accepted: the share of gates the rule answered afterwards and its error; supported: the "
        "share of gates whose lone answer the person's own answers of the kind supported (— where not judged), "
        "and the lone answers given without support.\n\n" + PAPER + "\n"
    )


def rules_section(results: list[VariantResult]) -> str:
    """For a replay without the study's fields: the suggested rules and support only."""
    rows = [
        [
            r.variant.name,
            f"{r.team.suggestions}: {_pct(r.team.suggestion_share)} ({_pct(r.team.suggestion_error)})",
            f"{_pct(r.team.supported_share)} ({r.team.unsupported_alone})",
        ]
        for r in results
        if r.team is not None
    ]
    if not any(r.team and (r.team.suggestions or r.team.supported_share is not None) for r in results):
        return ""
    columns = ("variant", "suggested rules: share (error)", "supported (lone unsupported)")
    header = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return (
        "\n## Suggested rules and support\n\n"
        + header
        + "\n".join("| " + " | ".join(row) + " |" for row in rows)
        + f"\n\nsuggested rules: a run of {SUGGEST_RUN} identical answers on one kind of action (its lineage, else "
        "its task type) with no contrary answer there, taken as accepted: the share of gates the rule answered "
        "afterwards and its error; supported: the share of gates whose lone answer the person's own answers of "
        "the kind supported, and the lone answers given without support.\n"
    )
