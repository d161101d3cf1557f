"""What the score knows, beside what a trivial baseline knows: a valid bound lets the
proxy answer alone only as far as its score separates right from wrong.

- AUROC and AUPRC of the predictor's score for "the proposed action is the person's"
  (AUPRC beside its base rate, the share right): what limits autonomy under a valid
  bound is how well the score separates right from wrong, not its scale.
- The one-tap share: gates answered alone, plus escalated gates whose suggested answer
  was the person's and needs no words (anything but `correct`, whose changes the person
  still writes); beside the pre-fill baseline, the person's most frequent action so far
  (online: never the gate's own answer), counted the same way.
- The realized error of the answers given alone, per context (task type) with at least
  MIN_CONTEXT_ALONE of them: where a pooled statement hides a context above target.

Pure functions over the replay's predictions, in each reviewer's order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

WORDS = "correct"  # the action whose changes the person still writes: never one tap
MIN_CONTEXT_ALONE = 10


class ContextError(BaseModel):
    task_type: str
    alone: int
    error: float


class Separation(BaseModel):
    auroc: float | None  # None: every gate right, or every one wrong
    auprc: float | None
    base_rate: float  # the share right: AUPRC's trivial value
    one_tap: float
    prefill_one_tap: float  # the baseline: the person's most frequent action so far
    contexts: list[ContextError]  # worst first


def auroc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """The probability that a right answer outscores a wrong one (ties count half):
    Mann-Whitney U over average ranks."""
    s, y = np.asarray(scores, float), np.asarray(right, bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    # Average ranks over ties.
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + b + 1) / 2  # 1-based average rank
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def auprc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """Average precision of the score for "right": the precision at each right answer,
    ranked by score (ties broken by order, highest first), averaged."""
    s, y = np.asarray(scores, float), np.asarray(right, bool)
    if not y.any() or y.all():
        return None
    y = y[np.argsort(-s, kind="mergesort")]
    hits = np.cumsum(y)
    return float(np.sum((hits / np.arange(1, len(y) + 1))[y]) / y.sum())


def prefill(actions: Sequence[str]) -> list[str | None]:
    """The person's most frequent action before each gate (None at the first; ties: the
    one reached first)."""
    seen: Counter[str] = Counter()
    out: list[str | None] = []
    for a in actions:
        out.append(seen.most_common(1)[0][0] if seen else None)
        seen[a] += 1
    return out


def one_tap(alone: Sequence[bool], suggested: Sequence[str | None], actual: Sequence[str]) -> float:
    """The share of gates the person settles in one tap or none."""
    if not len(actual):
        return 0.0
    hits = [a or (s == x and x != WORDS) for a, s, x in zip(alone, suggested, actual)]
    return float(np.mean(hits))


def context_errors(
    task_types: Sequence[str], alone: Sequence[bool], right: Sequence[bool], least: int = MIN_CONTEXT_ALONE
) -> list[ContextError]:
    """Per task type with at least `least` answers alone, worst first: the figures `vicar
    health`, the inbox and the audit export show from the checked answers
    (vicar.proxy.autonomy.checked), here over every answer alone (the replay knows each label)."""
    from vicar.proxy.autonomy.checked import Checked
    from vicar.proxy.autonomy.checked import context_errors as checked_errors

    labels = [Checked(t, "", not y, None, "replay") for t, a, y in zip(task_types, alone, right) if a]
    return [ContextError(task_type=c.task_type, alone=c.checked, error=c.error) for c in checked_errors(labels, least)]


def separation(
    scores: Sequence[float | None],
    right: Sequence[bool],
    alone: Sequence[bool],
    suggested: Sequence[str | None],
    actual: Sequence[str],
    task_types: Sequence[str],
    prefilled: Sequence[str | None],
) -> Separation:
    """`prefilled`: the baseline's suggestion per gate (`prefill` of each reviewer's own
    actions, joined in the same order as the rest). Gates without a score (no
    prediction) are left out of AUROC and AUPRC."""
    scored = [(s, y) for s, y in zip(scores, right) if s is not None]
    s = [x for x, _ in scored]
    y = [r for _, r in scored]
    return Separation(
        auroc=auroc(s, y),
        auprc=auprc(s, y),
        base_rate=float(np.mean(y)) if y else 0.0,
        one_tap=one_tap(alone, suggested, actual),
        prefill_one_tap=one_tap([False] * len(actual), prefilled, actual),
        contexts=context_errors(task_types, alone, right),
    )
