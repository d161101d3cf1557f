"""Where the proxy errs: the realized error, per context, of the answers it gave alone
whose label was taken later (docs/autonomy-bound.md, "Where the proxy errs").

The autonomy rule's statement is pooled: "the error of the gates scoring >= t, pooled
over every state and task type, is <= target". A context can run above the target
inside a pooled statement that holds. What shows it is the labels the drift test reads
too: the random audits (a gate the rule let through, sent to the person all the same)
and the person's after-the-fact reviews (`vicar review`). `vicar health` reads them from
the principal's store, the inbox's health page and `vicar audit export` from the audit
trail; the replay report (vicar/eval/separation.py), which knows every label, counts
its answers alone through the same `context_errors`.

A context is a task type, split by the target the gates were under (a state with its
own target in `autonomy.json` is its own context; in the audit trail, a gate whose
target rule set its threshold carries that rule's target). Each row says
how many checked answers it rests on and the one-sided 95% Clopper-Pearson lower end of
its error, so "2 wrong of 3" reads as the thin evidence it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel

from vicar.memory.store import RecordStore
from vicar.models.audit import AuditRecord
from vicar.settings import AutonomyParams

FEW = 10  # fewer checked answers than this: the figure is shown, marked as thin
LOWER_CONFIDENCE = 0.95  # the lower end's one-sided confidence


class Checked(NamedTuple):
    """One answer the proxy gave alone (or would have: an audit) whose label was taken."""

    task_type: str
    state: str
    wrong: bool
    target: float | None  # the target the gate was under (None: not known, the replay's)
    how: str  # "audit", "review" or "replay"


class ContextError(BaseModel):
    task_type: str
    states: list[str]  # the states whose gates are pooled in it
    target: float | None
    checked: int
    wrong: int
    audits: int = 0
    reviews: int = 0
    error: float
    lower: float  # the one-sided 95% Clopper-Pearson lower end of the error
    above: bool  # the realized error is above the target
    few: bool  # fewer than FEW checked answers

    @property
    def clearly_above(self) -> bool:
        """Above even at the lower end: not chance at 95%."""
        return self.target is not None and self.lower > self.target

    def line(self) -> str:
        """The context in one line, as `vicar health` and the export say it."""
        where = f"task type {self.task_type} ({', '.join(self.states)})"
        said = f"{self.wrong} wrong of {self.checked} checked ({self.error:.0%}"
        if self.target is not None:
            said += f", target {self.target:g}"
        said += f"; at least {self.lower:.1%} at {LOWER_CONFIDENCE:.0%} confidence)"
        if self.above and self.clearly_above:
            flag = "ABOVE TARGET: "
        elif self.above:
            flag = "above target, could be chance: "
        else:
            flag = ""
        if self.few:
            said += f", few checks (under {FEW})"
        return f"{flag}{where}: {said}"


def lower_bound(wrong: int, n: int, confidence: float = LOWER_CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson lower end of an error rate seen as wrong of n."""
    if wrong <= 0 or n <= 0:
        return 0.0
    from scipy.stats import beta  # slow to import; only where a figure is shown

    return float(beta.ppf(1.0 - confidence, wrong, n - wrong + 1))


def context_errors(labels: Iterable[Checked], least: int = 1) -> list[ContextError]:
    """Per context with at least `least` checked answers: the realized error, above target
    first, then worst first. The one computation of these figures (the replay's too)."""
    groups: dict[tuple[str, float | None], list[Checked]] = {}
    for c in labels:
        groups.setdefault((c.task_type, c.target), []).append(c)
    rows = []
    for (task_type, target), cs in groups.items():
        n, wrong = len(cs), sum(c.wrong for c in cs)
        if n < least:
            continue
        error = wrong / n
        rows.append(
            ContextError(
                task_type=task_type,
                states=sorted({c.state for c in cs if c.state}),
                target=target,
                checked=n,
                wrong=wrong,
                audits=sum(c.how == "audit" for c in cs),
                reviews=sum(c.how == "review" for c in cs),
                error=error,
                lower=lower_bound(wrong, n),
                above=target is not None and error > target,
                few=n < FEW,
            )
        )
    return sorted(rows, key=lambda r: (not r.above, -r.error, -r.checked, r.task_type))


def store_labels(store: RecordStore, principal_dir: Path, base: AutonomyParams) -> list[Checked]:
    """The checked answers in a principal's store, as the drift test reads them: the
    audited gates (their human answer against the proxy's) and the reviews, each under
    the target its state has now."""
    from vicar.proxy.autonomy.drift import labelled_pairs
    from vicar.proxy.autonomy.rule import autonomy_params
    from vicar.proxy.reviews import review_labels

    targets: dict[str, float] = {}

    def target(state: str) -> float:
        if state not in targets:
            targets[state] = autonomy_params(base, principal_dir, state).target_error
        return targets[state]

    out = [
        Checked(p.task_type, p.state, not p.correct, target(p.state), "audit")
        for p in labelled_pairs(store, "gate")
        if p.audit_p is not None
    ]
    out += [Checked(r.task_type, r.state, not r.right, target(r.state), "review") for r in review_labels(store)]
    return out


def record_labels(records: Iterable[AuditRecord]) -> list[Checked]:
    """The checked answers among audit records: an audited gate the person answered (the
    proxy's action against theirs) and an answer given alone that was reviewed."""
    out = []
    for r in records:
        if r.kind != "gate":
            continue
        if r.guard == "audit" and r.answered_by == "human" and r.proxy_action is not None:
            out.append(Checked(r.task_type, r.state, r.proxy_action != r.action, r.target, "audit"))
        elif r.answered_by == "proxy" and not r.escalated and r.review is not None:
            out.append(Checked(r.task_type, r.state, r.review.verdict == "wrong", r.target, "review"))
    return out


def summary(rows: list[ContextError]) -> str:
    """One line over the rows: how many contexts run above their target."""
    above = [r for r in rows if r.above]
    if not rows:
        return "No answer given alone has been checked yet (audits, reviews)."
    if not above:
        return f"No context runs above its target ({len(rows)} with checked answers)."
    clear = sum(r.clearly_above for r in above)
    return (
        f"{len(above)} of {len(rows)} contexts run above their target ({clear} clearly, at "
        f"{LOWER_CONFIDENCE:.0%} confidence): a rule (`vicar rules add`) or a pause (`vicar principal pause`) can "
        "send their gates to you."
    )
