"""The team prior: what a person's team answers on each kind of action, combined with the
person's own answers by hierarchical shrinkage, and the person's wish to be asked.

What crosses between principals is only `KindCounts`: per kind of action (the gate's task
type, its lineage, and the lineage's two parts where it names a tool or an app and what
it acts on: `bash:git status`, `Banking:Meeting details`), how many answers were each
outcome. An outcome is an action, with "+ask" where the person answered it "… but ask me
first". Never words, artifacts or memory ids: one person's memory never reaches another's
proxy.

The estimate for a gate, over outcomes:

1. the team's distribution: the team's answers on the two parts of the kind (the tool or
   app, and what it acts on; the task type where the lineage has no parts), each shrunk
   toward the team's overall answers and combined log-linearly, then the team's answers on
   the kind itself shrunk toward that;
2. the person's bias against it: per outcome, the person's answers over what the team's
   distribution expected on the same gates (shrunk to 1 by `BIAS_WEIGHT` pseudo-answers),
   overall and per kind (task type, the part acted on, the kind), each kind's bias shrunk
   toward the overall one. The person's own answers win as they accumulate: with many
   answers on a kind the estimate is their own rate there.

Without a team the same runs on the person's answers alone (the team's distribution is
uniform), which is how the wish to be asked is learned for a person without a team.

The weights were chosen on one half of the permission study's dev people by online
log-loss and confirmed on the other half (docs/team-prior.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

from vicar.models import GateRequest
from vicar.proxy.lineage import lineage_of

ASKED = "+ask"  # an outcome's suffix where the person wanted to be asked first
# Dimensions of a kind, most specific last. `all` scopes the others (gate kind and state).
DIMENSIONS = ("all", "task", "head", "tail", "lineage")
CROSS_WEIGHT = 40.0  # pseudo-answers of the team's overall answers behind each part's rate
LINEAGE_WEIGHT = 10.0  # pseudo-answers of the parts' combination behind the kind's own rate
BIAS_WEIGHT = 1.0  # pseudo-answers behind the person's overall bias (toward none)
# Pseudo-answers behind the person's bias on each kind (toward their overall bias).
OWN_WEIGHT = {"task": 1.0, "tail": 1.0, "lineage": 1.0}
FLOOR = 1e-6  # no outcome is impossible


def outcome_of(action: str, asked: bool = False) -> str:
    return f"{action}{ASKED}" if asked else action


def action_of(outcome: str) -> str:
    return outcome.removesuffix(ASKED)


def kinds_of(request: GateRequest) -> dict[str, str]:
    """The kind of action a gate is, per dimension, as keys scoped by the gate's kind and
    state. The lineage is the request's (the hooks name the tool and the command's
    program, never a path), else the title's (lineage_of)."""
    scope = f"{request.kind.value}|{request.state.value}"
    found = {"all": scope, "task": f"{scope}|{request.task_type}"}
    lineage = lineage_of(request).lineage.strip()
    if lineage:
        found["lineage"] = f"{scope}|{lineage}"
        head, sep, tail = lineage.partition(":")
        if sep and head.strip() and tail.strip():
            found["head"] = f"{scope}|{head.strip()}"
            found["tail"] = f"{scope}|{tail.strip()}"
    return found


class KindCounts(BaseModel):
    """Answers per kind of action: {dimension=kind: {outcome: count}}. A person's are
    rebuilt from their own outcome log; a team's are the sum of its members'."""

    counts: dict[str, dict[str, int]] = Field(default_factory=dict)

    def add(self, kinds: Mapping[str, str], outcome: str, n: int = 1) -> None:
        for dim, value in kinds.items():
            cell = self.counts.setdefault(f"{dim}={value}", {})
            cell[outcome] = cell.get(outcome, 0) + n

    def of(self, dim: str, kinds: Mapping[str, str]) -> dict[str, int]:
        value = kinds.get(dim)
        return self.counts.get(f"{dim}={value}", {}) if value is not None else {}

    def merge(self, other: "KindCounts") -> None:
        for key, cell in other.counts.items():
            mine = self.counts.setdefault(key, {})
            for outcome, n in cell.items():
                mine[outcome] = mine.get(outcome, 0) + n

    @classmethod
    def merged(cls, many: Iterable["KindCounts"]) -> "KindCounts":
        total = cls()
        for counts in many:
            total.merge(counts)
        return total

    def __bool__(self) -> bool:
        return bool(self.counts)


def _shrink(counts: Mapping[str, int], prior: Mapping[str, float], weight: float) -> dict[str, float]:
    n = sum(counts.get(o, 0) for o in prior)
    return {o: (counts.get(o, 0) + weight * p) / (n + weight) for o, p in prior.items()}


def _normalized(p: Mapping[str, float]) -> dict[str, float]:
    p = {o: max(v, FLOOR) for o, v in p.items()}
    total = sum(p.values())
    return {o: v / total for o, v in p.items()}


def team_distribution(team: KindCounts, kinds: Mapping[str, str], outcomes: Iterable[str]) -> dict[str, float]:
    """The team's answers on this kind of action, over `outcomes` (step 1 above)."""
    outcomes = list(outcomes)
    uniform = {o: 1.0 / len(outcomes) for o in outcomes}
    base = _shrink(team.of("all", kinds), uniform, len(outcomes))
    crossed = [d for d in ("head", "tail") if d in kinds] or ["task"]
    combined = dict(base)
    for dim in crossed:
        part = _shrink(team.of(dim, kinds), base, CROSS_WEIGHT)
        combined = {o: combined[o] * part[o] / base[o] for o in outcomes}
    combined = _normalized(combined)
    if "lineage" in kinds:
        combined = _shrink(team.of("lineage", kinds), combined, LINEAGE_WEIGHT)
    return _normalized(combined)


class Estimate(BaseModel):
    """The team prior's estimate for one gate."""

    probs: dict[str, float]  # over outcomes (action, or action+ask)
    team: dict[str, float]  # the team's distribution it started from (uniform without a team)
    has_team: bool
    sentence: str = ""

    def actions(self) -> dict[str, float]:
        """The probability of each action, whether or not the person wants to be asked."""
        out: dict[str, float] = {}
        for o, p in self.probs.items():
            out[action_of(o)] = out.get(action_of(o), 0.0) + p
        return out

    def asked(self, action: str) -> float:
        """P(the person wants to be asked | they answer `action`)."""
        yes, no = self.probs.get(outcome_of(action, True), 0.0), self.probs.get(action, 0.0)
        return yes / (yes + no) if yes + no > 0 else 0.0

    def wants_asked(self) -> float:
        return sum(p for o, p in self.probs.items() if o.endswith(ASKED))


class Own:
    """The person's own answers as the team prior reads them: per kind, what they answered
    and what the team's distribution expected of the same gates. A pure function of their
    outcome log (each record keeps the team's distribution its gate saw)."""

    def __init__(self) -> None:
        self.counts = KindCounts()  # what the person would contribute to a team
        self.expected: dict[str, dict[str, float]] = {}

    def observe(self, kinds: Mapping[str, str], outcome: str, team: Mapping[str, float] | None) -> None:
        """One answer of the person's, with the team's distribution its gate was predicted
        from (None: not recorded, as before the team prior: uniform over what they had
        answered)."""
        if not team:
            seen = sorted(set(self.counts.of("all", kinds)) | {outcome})
            team = dict.fromkeys(seen, 1.0 / len(seen))
        self.counts.add(kinds, outcome)
        for dim, value in kinds.items():
            cell = self.expected.setdefault(f"{dim}={value}", {})
            for o, p in team.items():
                cell[o] = cell.get(o, 0.0) + p

    def bias(
        self, dim: str, kinds: Mapping[str, str], outcomes: Iterable[str], prior: Mapping[str, float], weight: float
    ):
        seen = self.counts.of(dim, kinds)
        expected = self.expected.get(f"{dim}={kinds.get(dim)}", {})
        return {o: (seen.get(o, 0) + weight * prior[o]) / (expected.get(o, 0.0) + weight) for o in outcomes}


def estimate(
    request: GateRequest,
    own: Own,
    team: KindCounts | None,
    kinds: Mapping[str, str] | None = None,
) -> Estimate | None:
    """The estimate for one gate; None when neither the person nor their team has answered
    a gate of this kind and state."""
    kinds = kinds or kinds_of(request)
    mine = own.counts.of("all", kinds)
    theirs = team.of("all", kinds) if team else {}
    outcomes = sorted(set(mine) | set(theirs))
    if not outcomes:
        return None
    has_team = bool(theirs)
    start = (
        team_distribution(team, kinds, outcomes) if team and has_team else {o: 1.0 / len(outcomes) for o in outcomes}
    )
    overall = own.bias("all", kinds, outcomes, dict.fromkeys(outcomes, 1.0), BIAS_WEIGHT)
    probs = {o: start[o] * overall[o] for o in outcomes}
    for dim, weight in OWN_WEIGHT.items():
        if dim in kinds:
            local = own.bias(dim, kinds, outcomes, overall, weight)
            probs = {o: probs[o] * local[o] / overall[o] for o in outcomes}
    result = Estimate(probs=_normalized(probs), team=start, has_team=has_team)
    result.sentence = sentence(result, own, team if has_team else None, kinds)
    return result


# -- what the person is told -------------------------------------------------------------

_VERB = {"approve": "approves", "reject": "rejects", "correct": "corrects", "hold": "holds", "withdraw": "withdraws"}
_SAID = {"approve": "approved", "reject": "rejected", "correct": "corrected", "hold": "held", "withdraw": "withdrew"}


def _words(kinds: Mapping[str, str], dim: str) -> str:
    value = kinds[dim].split("|", 2)[-1] if dim != "all" else ""
    if dim == "lineage":
        head, sep, tail = value.partition(":")
        return f"“{tail.strip()}” ({head.strip()})" if sep and tail.strip() else f"“{value}”"
    return {"all": "gates like this", "task": f"{value} gates"}.get(dim, f"“{value}”")


def _share(counts: Mapping[str, int], action: str) -> tuple[int, int]:
    n = sum(counts.values())
    k = sum(c for o, c in counts.items() if action_of(o) == action)
    return k, n


def sentence(result: Estimate, own: Own, team: KindCounts | None, kinds: Mapping[str, str]) -> str:
    """ "your team approves “git status” (bash) 94% of the time (51 answers); you did 3 of 3"
    on the most specific kind each side has answered."""
    actions = result.actions()
    action = max(actions, key=lambda a: actions[a])
    parts = []
    order = ("lineage", "tail", "task", "all")
    if team:
        dim = next((d for d in order if d in kinds and team.of(d, kinds)), None)
        if dim:
            k, n = _share(team.of(dim, kinds), action)
            parts.append(
                f"your team {_VERB.get(action, action)} {_words(kinds, dim)} {round(100 * k / n)}% of the time "
                f"({n} answer{'s' if n != 1 else ''})"
            )
    dim = next((d for d in order if d in kinds and own.counts.of(d, kinds)), None)
    if dim:
        counts = own.counts.of(dim, kinds)
        k, n = _share(counts, action)
        asked = sum(c for o, c in counts.items() if o == outcome_of(action, True))
        mine = f"you {_SAID.get(action, action)} {k} of {n}" + ("" if dim == "lineage" else f" {_words(kinds, dim)}")
        if asked:
            mine += f", asking to be asked first {asked} time{'s' if asked != 1 else ''}"
        parts.append(mine)
    return "; ".join(parts)


TEAM_PREFIX = "team0:"  # PassResult.features: the team's distribution a gate started from


def team_to_features(team: Mapping[str, float]) -> dict[str, float]:
    return {f"{TEAM_PREFIX}{o}": round(float(p), 6) for o, p in team.items()}


def team_from_features(features: Mapping[str, float]) -> dict[str, float] | None:
    found = {k[len(TEAM_PREFIX) :]: float(v) for k, v in features.items() if k.startswith(TEAM_PREFIX)}
    return found or None


def lone_answer(result) -> tuple[str, float] | None:
    """(action, score) of the answer the proxy would give alone at a gate predicted as
    `result` (a PassResult): the action most likely given without a wish to be asked,
    scored P(that action, not asked). None without a prediction. Reads the distributions
    the learned predictor keeps in its features; the proposal and its confidence for any
    other predictor."""
    features = result.features or {}
    dist = {k[4:]: float(v) for k, v in features.items() if k.startswith("mix:")}
    if not dist:
        dist = {k.split(":", 1)[1]: float(v) for k, v in features.items() if k.startswith("p_vote:")}
    if not dist:
        if result.action is None:
            return None
        dist = {result.action.value: result.confidence}
    asked = {k[4:]: float(v) for k, v in features.items() if k.startswith("ask:")}
    scores = {a: p * (1.0 - asked.get(a, 0.0)) for a, p in dist.items()}
    best = max(scores, key=lambda a: scores[a])
    return best, scores[best]
