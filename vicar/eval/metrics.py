"""Evaluation metrics over replayed predictions. Pure functions: the tests check them
against hand-computed values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from vicar.proxy.concerns import concerns_in as shared_concerns_in
from vicar.settings import AutonomyParams

ACTIONS = ("approve", "correct", "reject", "hold")
# The baselines (majority, EMA) have no autonomy rule: they answer alone at this confidence.
BASELINE_THRESHOLD = 0.8
MAX_AUTONOMOUS_ERROR = AutonomyParams().target_error  # the product's target
COVERAGE_WINDOW = 500  # autonomous answers after each one, for the bound's coverage
COVERAGE_NOISE = 0.05  # a check's errors count as a miss only when the bound's rate makes them this unlikely
HISTORY_WINDOW = 1000  # gates of a reviewer's history per point of autonomy against history


class Prediction(BaseModel):
    """One replayed gate: what was predicted, with what confidence, and what happened."""

    seq: int
    actual: str
    predicted: str | None  # None: no prediction (no evidence)
    confidence: float  # calibrated
    prior_confidence: float = 0.0
    posterior_confidence: float | None = None  # the predictor's own, before the guards
    autonomous: bool  # would the proxy have answered alone (when_unsure)
    predicted_text: str = ""
    actual_text: str = ""
    surprise: bool = False
    surprise_percepts: list[str] = []
    prior_predicted: str | None = None
    cost_usd: float = 0.0  # LLM predictors: what this gate's calls cost
    fired: list[str] = []  # every calibration guard that fired
    regretted: bool = False  # answered alone, then reversed by the human on its lineage (found later)
    bound: float | None = None  # the error bound the rule stated at this gate (None: no threshold in force)
    prereview_text: str = ""  # the pre-review's items (vicar.proxy.prereview), one paragraph each
    prereview_learned_text: str = ""  # the same ranked by the weights learned online (RankLearner)
    task_type: str = ""
    # The answer offered for one tap on an escalated gate (None: the predicted action).
    suggested: str | None = None
    # Teams and the wish to be asked (vicar/eval/team_scores.py): the kind of action (a rule
    # suggestion's scope), the dataset's split, whether the person answered "… but ask me
    # first", the predicted probability of that, the answer the proxy would give alone and
    # P(it is theirs and they did not want to be asked), and whether the person's own
    # answers supported a lone answer (None: not judged).
    kind: str = ""
    split: str | None = None
    ask_first: bool = False
    wants_asked: float | None = None
    alone_action: str | None = None
    alone_score: float | None = None
    supported: bool | None = None

    @property
    def correct(self) -> bool:
        return self.predicted == self.actual


def score_of(p: Prediction) -> float | None:
    """The score the autonomy rule reads: the predictor's own confidence (a baseline's
    confidence when it has no other); None without a prediction."""
    if p.predicted is None:
        return None
    return p.posterior_confidence if p.posterior_confidence is not None else p.confidence


def accuracy(preds: Sequence[Prediction]) -> float:
    return float(np.mean([p.correct for p in preds])) if preds else 0.0


def per_class_f1(preds: Sequence[Prediction], classes: Sequence[str] = ACTIONS) -> dict[str, float | None]:
    """F1 per class; None for a class that never occurs and is never predicted."""
    out: dict[str, float | None] = {}
    for c in classes:
        tp = sum(p.predicted == c and p.actual == c for p in preds)
        fp = sum(p.predicted == c and p.actual != c for p in preds)
        fn = sum(p.predicted != c and p.actual == c for p in preds)
        if tp + fp + fn == 0:
            out[c] = None
        else:
            out[c] = 2 * tp / (2 * tp + fp + fn)
    return out


def macro_f1(preds: Sequence[Prediction], classes: Sequence[str] = ACTIONS) -> float:
    """Mean F1 over the classes that occur or are predicted."""
    scores = [s for s in per_class_f1(preds, classes).values() if s is not None]
    return float(np.mean(scores)) if scores else 0.0


def brier(preds: Sequence[Prediction]) -> float:
    """Brier score of the confidence as the probability that the predicted action is right."""
    return float(np.mean([(p.confidence - p.correct) ** 2 for p in preds])) if preds else 0.0


class Bin(BaseModel):
    lo: float
    hi: float
    count: int
    confidence: float | None
    accuracy: float | None


def reliability(preds: Sequence[Prediction], bins: int = 10) -> list[Bin]:
    edges = np.linspace(0, 1, bins + 1)
    out = []
    for i in range(bins):
        lo, hi = edges[i], edges[i + 1]
        inside = [p for p in preds if lo <= p.confidence < hi or (i == bins - 1 and p.confidence == 1.0)]
        out.append(
            Bin(
                lo=float(lo),
                hi=float(hi),
                count=len(inside),
                confidence=float(np.mean([p.confidence for p in inside])) if inside else None,
                accuracy=float(np.mean([p.correct for p in inside])) if inside else None,
            )
        )
    return out


def ece(preds: Sequence[Prediction], bins: int = 10) -> float:
    """Expected calibration error: bin-weighted |accuracy - confidence|."""
    n = len(preds)
    if not n:
        return 0.0
    return float(
        sum(
            b.count / n * abs(b.accuracy - b.confidence)
            for b in reliability(preds, bins)
            if b.count and b.accuracy is not None and b.confidence is not None
        )
    )


class Autonomy(BaseModel):
    share: float  # realized: of gates the proxy decided alone
    error: float | None  # realized: error rate of those decisions
    best_share: float  # hindsight: highest autonomy with error <= 5% over all thresholds
    best_threshold: float | None
    # The bound's coverage: of the windows of COVERAGE_WINDOW autonomous answers that
    # start at each one, the share whose realized error stayed <= the target.
    coverage: float | None = None
    coverage_windows: int = 0
    # Per HISTORY_WINDOW gates of each reviewer's history: start, end, gates, share, error.
    by_history: list[dict] = Field(default_factory=list)
    # Per reviewer history (the goals in bench/AUTONOMY_BOUND_RESULTS.md): the worst error
    # of a STRETCH-gate stretch with >= MIN_STRETCH_ALONE answers alone, how many such
    # stretches and how many ran above 7.5%; the share of checks (gates with a bound
    # stated) whose bound covered the error of the answers alone in the next 500 gates;
    # the hindsight ceiling (best threshold per stretch) and the fixed-threshold one;
    # and the human's load (escalations + audits, as a share of gates).
    worst_stretch: float | None = None
    stretches: int = 0
    stretches_over: int = 0
    check_coverage: float | None = None
    checks: int = 0
    target_coverage: float | None = None  # the same checks judged against the target ("error <= 5%")
    # The same checks, covered when the errors of the next answers are a count the bound's
    # rate reaches with probability above COVERAGE_NOISE (sampling noise is not a miss).
    noise_coverage: float | None = None
    ceiling: float = 0.0
    ceiling_fixed: float = 0.0
    of_ceiling: float | None = None
    load: float = 1.0


def bound_coverage(
    groups: Sequence[Sequence[Prediction]], target: float = MAX_AUTONOMOUS_ERROR, window: int = COVERAGE_WINDOW
) -> tuple[float | None, int]:
    """(share of windows within target, windows). Each autonomous answer starts a window
    of the next `window` autonomous answers of the same reviewer (itself included);
    only full windows count, or one window of all of them when a reviewer has fewer.
    Linear: running sums."""
    ok = total = 0
    for preds in groups:
        wrong = np.array([not p.correct for p in preds if p.autonomous], dtype=float)
        if not len(wrong):
            continue
        size = min(window, len(wrong))
        sums = np.convolve(wrong, np.ones(size), mode="valid")  # errors per window, one per start
        ok += int(np.sum(sums / size <= target + 1e-12))
        total += len(sums)
    return (ok / total if total else None), total


def autonomy_by_history(groups: Sequence[Sequence[Prediction]], window: int = HISTORY_WINDOW) -> list[dict]:
    """Autonomy share and error per `window` gates of history, pooled over reviewers
    (a reviewer's gates i*window .. (i+1)*window - 1 go to point i)."""
    out: list[dict] = []
    longest = max((len(g) for g in groups), default=0)
    for start in range(0, longest, window):
        chunk = [p for g in groups for p in g[start : start + window]]
        alone = [p for p in chunk if p.autonomous]
        out.append(
            {
                "start": start,
                "end": start + window,
                "gates": len(chunk),
                "share": len(alone) / len(chunk),
                "error": (1 - accuracy(alone)) if alone else None,
            }
        )
    return out


def autonomy(
    preds: Sequence[Prediction],
    groups: Sequence[Sequence[Prediction]] | None = None,
    target: float = MAX_AUTONOMOUS_ERROR,
) -> Autonomy:
    """Realized autonomy of `preds`; `groups` splits them by reviewer (in each one's
    order) for the figures that follow a history (default: one history)."""
    groups = [preds] if groups is None else groups
    alone = [p for p in preds if p.autonomous]
    share = len(alone) / len(preds) if preds else 0.0
    error = (1 - accuracy(alone)) if alone else None
    coverage, windows = bound_coverage(groups, target)
    best, best_t = 0.0, None
    # One sweep down the confidences with running counts (not a pass over every
    # prediction per threshold, which was quadratic in the number of gates).
    ranked = sorted((p for p in preds if p.predicted is not None), key=lambda p: p.confidence, reverse=True)
    right = 0
    for i, p in enumerate(ranked):
        right += p.correct
        if i + 1 < len(ranked) and ranked[i + 1].confidence == p.confidence:
            continue  # a threshold takes every prediction at or above it
        taken = i + 1
        if 1 - right / taken <= target and taken / len(preds) > best:
            best, best_t = taken / len(preds), p.confidence
    stretches = [x for g in groups for x in stretch_errors([p.autonomous for p in g], [p.correct for p in g])]
    checks = 0
    covered = within = consistent = ceiling = fixed = 0.0
    for g in groups:
        was_alone, was_right = [p.autonomous for p in g], [p.correct for p in g]
        cov, n = statement_coverage([p.bound for p in g], was_alone, was_right)
        covered += (cov or 0.0) * n
        checks += n
        cov, _ = statement_coverage([None if p.bound is None else target for p in g], was_alone, was_right)
        within += (cov or 0.0) * n
        cov, _ = statement_coverage([p.bound for p in g], was_alone, was_right, noise=COVERAGE_NOISE)
        consistent += (cov or 0.0) * n
        per, one = hindsight_ceiling(
            [p.posterior_confidence if p.predicted else None for p in g], [p.correct for p in g]
        )
        ceiling += per * len(g)
        fixed += one * len(g)
    total = len(preds)
    ceiling, fixed = (ceiling / total, fixed / total) if total else (0.0, 0.0)
    return Autonomy(
        share=share,
        error=error,
        best_share=best,
        best_threshold=best_t,
        coverage=coverage,
        coverage_windows=windows,
        by_history=autonomy_by_history(groups),
        worst_stretch=max((e for _, _, e in stretches), default=None),
        stretches=len(stretches),
        stretches_over=sum(e > STRETCH_LIMIT for _, _, e in stretches),
        check_coverage=covered / checks if checks else None,
        target_coverage=within / checks if checks else None,
        noise_coverage=consistent / checks if checks else None,
        checks=checks,
        ceiling=ceiling,
        ceiling_fixed=fixed,
        of_ceiling=share / ceiling if ceiling else None,
        load=1.0 - share,
    )


def autonomy_curve(preds: Sequence[Prediction], points: int = 21) -> list[tuple[float, float, float]]:
    """(threshold, share decided alone, error of those) as the threshold falls from 1 to 0."""
    out = []
    for t in np.linspace(1.0, 0.0, points):
        chosen = [p for p in preds if p.predicted is not None and p.confidence >= t]
        if chosen:
            out.append((float(t), len(chosen) / len(preds), 1 - accuracy(chosen)))
    return out


def concerns_in(text: str, themes: Sequence[str] = ()) -> set[str]:
    """The one vocabulary's concerns (vicar.proxy.concerns): categories on word boundaries, tags stripped."""
    return shared_concerns_in(text, themes)


class SurpriseCalibration(BaseModel):
    surprises: int
    confirmed: float | None  # the confidence moved the right way for the human's answer
    percepts_in_response: float | None  # a salient percept appears in the human's words


def surprise_calibration(preds: Sequence[Prediction]) -> SurpriseCalibration:
    """The design's surprise calibration: when the artifact moved the proxy's
    confidence by more than 0.3, was the move confirmed by the human's answer? Up and
    right, or down and (the posterior) wrong, counts as confirmed."""
    s = [p for p in preds if p.surprise]
    if not s:
        return SurpriseCalibration(surprises=0, confirmed=None, percepts_in_response=None)
    confirmed = [(p.confidence > p.prior_confidence) == p.correct for p in s]
    percepts = [any(w.lower() in p.actual_text.lower() for w in p.surprise_percepts) for p in s]
    return SurpriseCalibration(
        surprises=len(s), confirmed=float(np.mean(confirmed)), percepts_in_response=float(np.mean(percepts))
    )


def _window_scores(w: Sequence[Prediction], start: int, end: int) -> dict:
    a = autonomy(w)
    return {
        "start": start,
        "end": end,
        "accuracy": accuracy(w),
        "macro_f1": macro_f1(w),
        "brier": brier(w),
        "autonomy": a.share,
        "autonomous_error": a.error,
    }


def pooled_curve(groups: Sequence[Sequence[Prediction]], windows: int = 10) -> list[dict]:
    """Several reviewers' learning curves pooled by position: window i holds each
    reviewer's i-th tenth of their own history (not one concatenated stream, where a
    reviewer's fresh memory would look like forgetting). start/end are in tenths."""
    kept = [g for g in groups if len(g) >= windows]
    splits = [np.array_split(np.arange(len(g)), windows) for g in kept]
    if not kept:
        return []
    return [
        _window_scores([g[j] for g, split in zip(kept, splits) for j in split[i]], i, i + 1) for i in range(windows)
    ]


def learning_curve(preds: Sequence[Prediction], windows: int = 10) -> list[dict]:
    """Accuracy, macro-F1, Brier and autonomy per consecutive window as memory grows: one
    reviewer's gates in `windows` windows of equal size (to one gate), never a short tail."""
    if not preds:
        return []
    out = []
    for idx in np.array_split(np.arange(len(preds)), min(windows, len(preds))):
        start = int(idx[0])
        out.append(_window_scores(preds[start : start + len(idx)], start, start + len(idx)))
    return out


STRETCH = 1000  # gates per stretch of a reviewer's history, for the per-stretch figures
MIN_STRETCH_ALONE = 30  # a stretch's error is judged on at least this many answers alone
STRETCH_LIMIT = 0.075  # the goal's ceiling on one stretch's error


def best_share(scores: np.ndarray, correct: np.ndarray, total: int, target: float = MAX_AUTONOMOUS_ERROR) -> float:
    """In hindsight, the largest share of `total` gates answerable alone at one threshold
    (score >= t, ties together) with error <= target; scores NaN: no prediction."""
    keep = ~np.isnan(scores)
    s, ok = scores[keep], correct[keep]
    if not len(s) or not total:
        return 0.0
    order = np.argsort(-s, kind="stable")
    s, ok = s[order], ok[order]
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    taken = ends + 1
    err = 1 - np.cumsum(ok)[ends] / taken
    good = taken[err <= target + 1e-12]
    return float(good.max() / total) if len(good) else 0.0


def hindsight_ceiling(
    scores: Sequence[float | None],
    correct: Sequence[bool],
    stretch: int = STRETCH,
    target: float = MAX_AUTONOMOUS_ERROR,
) -> tuple[float, float]:
    """(per-stretch, fixed) hindsight autonomy of one reviewer's history: the best
    threshold chosen per `stretch` gates, and one threshold for the whole history. A rule
    whose threshold moves can beat the fixed one; none can beat the per-stretch one
    (within the stretch's resolution), so that is the ceiling autonomy is judged against."""
    s = np.array([np.nan if x is None else x for x in scores], dtype=float)
    ok = np.asarray(correct, dtype=bool)
    n = len(s)
    per = sum(
        best_share(s[i : i + stretch], ok[i : i + stretch], len(s[i : i + stretch])) * len(s[i : i + stretch])
        for i in range(0, n, stretch)
    )
    return (per / n if n else 0.0), best_share(s, ok, n)


def stretch_errors(
    alone: Sequence[bool], correct: Sequence[bool], stretch: int = STRETCH, least: int = MIN_STRETCH_ALONE
) -> list[tuple[int, int, float]]:
    """(start, answers alone, error) per `stretch` gates with at least `least` answers alone."""
    a, ok = np.asarray(alone, dtype=bool), np.asarray(correct, dtype=bool)
    out = []
    for i in range(0, len(a), stretch):
        m = a[i : i + stretch]
        if m.sum() >= least:
            out.append((i, int(m.sum()), float(1 - ok[i : i + stretch][m].mean())))
    return out


def statement_coverage(
    stated: Sequence[float | None],
    alone: Sequence[bool],
    correct: Sequence[bool],
    horizon: int = COVERAGE_WINDOW,
    least: int = MIN_STRETCH_ALONE,
    noise: float | None = None,
) -> tuple[float | None, int]:
    """(share of checks covered, checks). A check is a gate at which a bound is stated
    (`stated`: the bound, None where the rule states none) and whose next `horizon`
    gates hold at least `least` answers alone; it is covered when their realized error
    is within the bound. With `noise`: when their count of errors is one that answers
    erring at the bound's rate would reach with probability above `noise` (a bound on a
    rate, judged on 30 answers, is exceeded by their share by chance: at a true error of
    2.8% and the bound 5%, 3 wrong of 40 happens one time in ten)."""
    from scipy.stats import binom

    a = np.asarray(alone, dtype=bool)
    wrong = a & ~np.asarray(correct, dtype=bool)
    ca, cw = np.concatenate([[0], np.cumsum(a)]), np.concatenate([[0], np.cumsum(wrong)])
    ok = total = 0
    for t, b in enumerate(stated):
        if b is None:
            continue
        end = min(t + horizon, len(a))
        k = ca[end] - ca[t]
        if k >= least:
            total += 1
            errors = cw[end] - cw[t]
            if noise is None:
                ok += errors / k <= b + 1e-12
            else:
                ok += binom.sf(errors - 1, k, b) > noise  # P(at least this many wrong | rate b)
    return (ok / total if total else None), total
