"""A selector: the probability that the proxy's proposed answer is the person's,
learned online for one principal (selective prediction's dedicated selector).

The predictor proposes an action with a confidence; the selector re-scores that
proposal from what the predictor does not read: the artifact itself (files and paths
touched, tests, new or deleted files, the kind of change), the lineage (revision, the
person's earlier verdicts on it, whether the proxy was right there), the upstream
agent's record with this person (the proxy's error on its artifacts, its last
outcome), how recently the person corrected similar work (same task type, same files,
same agent), the task type's running error, the proposed action's running precision,
and the predictor's own confidence and class probabilities.

Pure and deterministic: a principal's selector is a function of the gates it was told
about, in order (`observe`), so it can be rebuilt from the outcome log; fits are
seeded and single-threaded. Only what came before a gate is used to score it: rows
are taken when a gate is scored, labelled when (if) the person's answer comes, and the
model is refitted every `refit_every` labelled rows. No dependency on bench code; numpy
and lightgbm only (lightgbm is imported when the first fit is made).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.score.gate_features import (
    ACTIONS,
    KINDS,
    NAN,
    WORDS_ACTIONS,
    Gate,
    artifact_features,
    similar_keys,
    touched_files,
)


@dataclass(frozen=True)
class SelectorParams:
    refit_every: int = 100  # labelled rows between fits
    least: int = 100  # labelled rows (right and wrong among them) before the first fit
    window: int = 0  # fit on the latest rows only (0: all)
    prior: float = 5.0  # pseudo-counts pulling each running rate towards the principal's
    # Chosen on one reviewer (lkml-hwmon's Guenter Roeck), checked on the others
    # (bench/score/results/tuning-guenter.md): few, shallow trees on many rows each,
    # boosted from the score, beat deeper ones (which lost the score's ranking).
    trees: int = 60
    leaves: int = 4
    learning_rate: float = 0.03
    min_leaf: int = 100
    bagging: float = 0.8  # row subsample per tree (1: none; then the seed does not matter)
    feature_fraction: float = 0.8
    l2: float = 1.0
    learner: str = "lightgbm"  # or "logistic"
    # Boost from the predictor's score: the trees start at logit(score) and learn what to
    # add to it (a weak correction keeps the score's ranking), instead of from a constant.
    from_score: bool = True
    seed: int = 0


# Feature groups, for the ablation; every feature belongs to exactly one.
GROUPS: dict[str, tuple[str, ...]] = {
    "score": ("score", "logit", "margin", "entropy", "p_approve", "p_correct", "proposed"),
    "artifact": (
        "chars",
        "title_words",
        "files",
        "new_files",
        "deleted_files",
        "renamed",
        "plus",
        "minus",
        "hunks",
        "tests",
        "docs",
        "bindings",
        "build",
        "headers",
        "maintainers",
        "top_dirs",
        "tags",
        "signoffs",
        "fixes_tag",
        "stable",
        "cover",
        "commits",
        "subjects",
        *(f"kind_{k}" for k in KINDS),
    ),
    "lineage": (
        "revision",
        "position",
        "series_size",
        "lin_seen",
        "lin_turned",
        "lin_last",
        "lin_proxy_wrong",
        "lin_ago",
    ),
    "agent": ("agent_seen", "agent_err", "agent_turned", "agent_last_wrong", "agent_ago"),
    "recency": (
        "task_since_turned",
        "task_since_wrong",
        "file_since_turned",
        "file_seen",
        "file_err",
        "agent_since_turned",
        "recent_err20",
        "recent_err100",
        "task_recent_err",
    ),
    "context": ("task_seen", "task_err", "task_turned", "action_prec", "task_action_prec", "habit", "habit_share"),
    "similar": ("sim_top", "sim_mean", "sim_agree", "sim_turned", "sim_err", "sim_err_near"),
}
SIMILAR_K = 5  # the nearest past artifacts whose answers are read (the pre-review's similar_work)
SIMILAR_WIDE = 25  # and the wider circle for the proxy's error there
FEATURES: tuple[str, ...] = tuple(f for names in GROUPS.values() for f in names)
INDEX = {f: i for i, f in enumerate(FEATURES)}


@dataclass
class _Rate:
    """A running count of the proxy's labelled answers and its wrong ones, with when the
    person last turned work back and when the proxy was last wrong (gate indices)."""

    n: int = 0
    wrong: int = 0
    turned: int = 0
    seen: int = 0  # gates, labelled or not
    last_turned: int | None = None
    last_wrong: int | None = None
    last_seen: int | None = None
    last_right: bool | None = None
    last_action: str | None = None
    recent: deque = field(default_factory=lambda: deque(maxlen=20))


class History:
    """What the selector knows of the principal's past gates: running counts per task
    type, agent, lineage, file or directory, and proposed action."""

    def __init__(self, prior: float = 5.0) -> None:
        self.prior = prior
        self.i = 0  # gates seen
        self.n = 0  # labelled
        self.wrong = 0
        self.actions: Counter[str] = Counter()  # the person's actions, labelled gates
        self.rates: dict[tuple[str, str], _Rate] = {}
        self.recent: deque[int] = deque(maxlen=100)
        # The labelled gates' artifact vectors, with the person's action and whether the
        # proxy was right: grown by doubling, so an answer is O(dim) amortized.
        self._vecs = np.zeros((0, 0), dtype=np.float32)
        self._vec_n = 0
        self._vec_action: list[str] = []
        self._vec_right: list[bool] = []

    def _rate(self, scope: str, key: str) -> _Rate:
        r = self.rates.get((scope, key))
        if r is None:
            r = self.rates[(scope, key)] = _Rate()
        return r

    def _peek(self, scope: str, key: str | None) -> _Rate | None:
        return self.rates.get((scope, key)) if key else None

    def _err(self, r: _Rate | None) -> float:
        base = (self.wrong + 1.0) / (self.n + 2.0)
        if r is None:
            return base
        return (r.wrong + self.prior * base) / (r.n + self.prior)

    def _since(self, at: int | None) -> float:
        return NAN if at is None else float(self.i - at)

    def similar(self, gate: Gate) -> dict[str, float]:
        """The person's answers on the nearest past artifacts, and the proxy's error there."""
        if gate.vector is None or not self._vec_n:
            return {}
        sims = self._vecs[: self._vec_n] @ gate.vector.astype(np.float32)
        k = min(SIMILAR_WIDE, len(sims))
        wide = np.argpartition(-sims, k - 1)[:k]
        wide = wide[np.argsort(-sims[wide], kind="stable")]
        near = wide[:SIMILAR_K]
        acts = [self._vec_action[j] for j in near]
        w = np.clip(sims[wide], 0.0, None) + 1e-6
        wrong_wide = np.array([not self._vec_right[j] for j in wide], float)
        return {
            "sim_top": float(sims[near[0]]),
            "sim_mean": float(sims[near].mean()),
            "sim_agree": float(np.mean([a == gate.action for a in acts])) if gate.action else NAN,
            "sim_turned": float(np.mean([a in WORDS_ACTIONS for a in acts])),
            "sim_err": float((w * wrong_wide).sum() / w.sum()),
            "sim_err_near": float(wrong_wide[: len(near)].mean()),
        }

    def _remember(self, vector: np.ndarray, person: str, right: bool) -> None:
        if self._vec_n == len(self._vecs):
            grown = np.zeros((max(64, 2 * len(self._vecs)), len(vector)), dtype=np.float32)
            if self._vec_n:
                grown[: self._vec_n] = self._vecs[: self._vec_n]
            self._vecs = grown
        self._vecs[self._vec_n] = vector
        self._vec_n += 1
        self._vec_action.append(person)
        self._vec_right.append(right)

    def features(self, gate: Gate, files: Sequence[str]) -> dict[str, float]:
        task = self._peek("task", gate.task_type)
        agent = self._peek("agent", gate.agent)
        lin = self._peek("lineage", gate.lineage)
        act = self._peek("action", gate.action)
        task_act = self._peek("task_action", f"{gate.task_type}|{gate.action}")
        places = [r for r in (self._peek("file", k) for k in similar_keys(files)) if r is not None]
        worst_place = max(places, key=self._err) if places else None
        turned_places = [r.last_turned for r in places if r.last_turned is not None]
        habit, habit_n = self.actions.most_common(1)[0] if self.actions else (None, 0)
        recent = list(self.recent)
        f = {
            "lin_seen": float(lin.seen) if lin else 0.0,
            "lin_turned": float(lin.turned) if lin else 0.0,
            "lin_last": float(ACTIONS.index(lin.last_action)) if lin and lin.last_action in ACTIONS else NAN,
            "lin_proxy_wrong": NAN if not lin or lin.last_right is None else float(not lin.last_right),
            "lin_ago": self._since(lin.last_seen) if lin else NAN,
            "agent_seen": float(agent.seen) if agent else 0.0,
            "agent_err": self._err(agent) if gate.agent else NAN,
            "agent_turned": (agent.turned + self.prior * 0.5) / (agent.n + self.prior) if agent else NAN,
            "agent_last_wrong": NAN if not agent or agent.last_right is None else float(not agent.last_right),
            "agent_ago": self._since(agent.last_seen) if agent else NAN,
            "task_since_turned": self._since(task.last_turned) if task else NAN,
            "task_since_wrong": self._since(task.last_wrong) if task else NAN,
            "file_since_turned": float(self.i - max(turned_places)) if turned_places else NAN,
            "file_seen": float(max((r.seen for r in places), default=0)),
            "file_err": self._err(worst_place) if places else NAN,
            "agent_since_turned": self._since(agent.last_turned) if agent else NAN,
            "recent_err20": float(np.mean(recent[-20:])) if recent else NAN,
            "recent_err100": float(np.mean(recent)) if recent else NAN,
            "task_recent_err": float(np.mean(task.recent)) if task and task.recent else NAN,
            "task_seen": float(task.seen) if task else 0.0,
            "task_err": self._err(task),
            "task_turned": (task.turned + self.prior * 0.5) / (task.n + self.prior) if task else NAN,
            "action_prec": 1.0 - self._err(act) if gate.action else NAN,
            "task_action_prec": 1.0 - self._err(task_act) if gate.action else NAN,
            "habit": NAN if habit is None or gate.action is None else float(gate.action == habit),
            "habit_share": habit_n / self.n if self.n else NAN,
            **self.similar(gate),
        }
        return f

    def observe(self, gate: Gate, files: Sequence[str], person: str | None, right: bool | None = None) -> None:
        """One gate, after its outcome. person: the person's action (None: not seen);
        right: whether the proposal was the person's (default: person == gate.action)."""
        keys = [
            ("task", gate.task_type),
            ("agent", gate.agent),
            ("lineage", gate.lineage),
            *(("file", k) for k in similar_keys(files)),
        ]
        labelled = person is not None and gate.action is not None
        right = labelled and (person == gate.action if right is None else right)
        turned = person in WORDS_ACTIONS
        for scope, key in keys:
            if not key:
                continue
            r = self._rate(scope, key)
            r.seen += 1
            r.last_seen = self.i
            if person is not None:
                r.last_action = person
                if turned:
                    r.turned += 1
                    r.last_turned = self.i
            if labelled:
                r.n += 1
                r.wrong += not right
                r.last_right = right
                r.recent.append(float(not right))
                if not right:
                    r.last_wrong = self.i
        if labelled:
            for scope, key in (("action", gate.action), ("task_action", f"{gate.task_type}|{gate.action}")):
                r = self._rate(scope, key)  # type: ignore[arg-type]
                r.n += 1
                r.wrong += not right
            self.n += 1
            self.wrong += not right
            self.recent.append(int(not right))
        if person is not None:
            self.actions[person] += 1
            if labelled and gate.vector is not None:
                self._remember(gate.vector, person, right)
        self.i += 1


def score_features(gate: Gate) -> dict[str, float]:
    s = gate.score
    probs = dict(gate.probs or {})
    top = sorted(probs.values(), reverse=True)
    ps = np.array([p for p in probs.values() if p > 0])
    return {
        "score": NAN if s is None else float(s),
        "logit": NAN if s is None else math.log(min(max(s, 1e-4), 1 - 1e-4) / (1 - min(max(s, 1e-4), 1 - 1e-4))),
        "margin": top[0] - top[1] if len(top) > 1 else NAN,
        "entropy": float(-(ps * np.log(ps)).sum()) if len(ps) else NAN,
        "p_approve": probs.get("approve", NAN) if probs else NAN,
        "p_correct": probs.get("correct", NAN) if probs else NAN,
        "proposed": float(ACTIONS.index(gate.action)) if gate.action in ACTIONS else NAN,
    }


class Selector:
    """One principal's selector. `confidence(gate)` before the outcome (None until the
    first fit: the caller keeps the predictor's score), `observe(gate, person)` after."""

    def __init__(self, params: SelectorParams = SelectorParams(), groups: Sequence[str] | None = None) -> None:
        self.params = params
        self.history = History(params.prior)
        self.columns = np.array(
            [INDEX[f] for g in (groups or GROUPS) for f in GROUPS[g]], dtype=int
        )  # the features this selector reads (an ablation drops groups)
        self.rows: list[np.ndarray] = []
        self.labels: list[int] = []
        self.model = None
        self._pending: tuple[Gate, np.ndarray, list[str]] | None = None

    def features(self, gate: Gate) -> tuple[np.ndarray, list[str]]:
        files = touched_files(gate.text)
        art = gate.artifact if gate.artifact is not None else artifact_features(gate)
        f = {**art, **score_features(gate), **self.history.features(gate, files)}
        return np.array([f.get(name, NAN) for name in FEATURES], dtype=np.float64), files

    def confidence(self, gate: Gate) -> float | None:
        row, files = self.features(gate)
        self._pending = (gate, row, files)
        if self.model is None or gate.action is None:
            return None
        return float(self._predict(row[None, :])[0])

    def observe(self, gate: Gate, person: str | None, right: bool | None = None) -> None:
        """The gate's outcome: the person's action, or None when the proxy answered alone
        and nobody looked (the label is never known). right: whether the proposal was
        the person's, when the caller knows it otherwise (default: person == gate.action)."""
        if self._pending is not None and self._pending[0] is gate:
            _, row, files = self._pending
        else:
            row, files = self.features(gate)
        self._pending = None
        if person is not None and gate.action is not None:
            self.rows.append(row)
            self.labels.append(int(person == gate.action if right is None else right))
            if len(self.labels) % self.params.refit_every == 0:
                self.fit()
        self.history.observe(gate, files, person, right)

    def fit(self) -> None:
        p = self.params
        y = np.array(self.labels[-p.window :] if p.window else self.labels)
        if len(y) < p.least or y.all() or not y.any():
            return
        rows = np.vstack(self.rows[-len(y) :])
        X = rows[:, self.columns]
        if p.learner == "logistic":
            self.model = _Logistic(X, y, p.l2)
            return
        import lightgbm as lgb

        params = dict(
            objective="binary",
            num_leaves=p.leaves,
            learning_rate=p.learning_rate,
            min_data_in_leaf=p.min_leaf,
            lambda_l2=p.l2,
            feature_fraction=p.feature_fraction,
            bagging_fraction=p.bagging,
            bagging_freq=1 if p.bagging < 1 else 0,
            max_bin=63,
            num_threads=1,
            deterministic=True,
            force_row_wise=True,
            seed=p.seed,
            verbose=-1,
        )
        init = _base_margin(rows) if p.from_score else None
        data = lgb.Dataset(X, y, init_score=init, params={"verbose": -1, "max_bin": 63})
        self.model = lgb.train(params, data, num_boost_round=p.trees)

    def _predict(self, rows: np.ndarray) -> np.ndarray:
        X = rows[:, self.columns]
        if isinstance(self.model, _Logistic):
            return self.model.predict(X)
        if self.params.from_score:
            z = self.model.predict(X, raw_score=True, num_threads=1) + _base_margin(rows)
            return 0.5 * (1.0 + np.tanh(0.5 * z))
        return self.model.predict(X, num_threads=1)


def _base_margin(rows: np.ndarray) -> np.ndarray:
    """logit(score) per row, clipped (no score: 0, even odds)."""
    s = rows[:, INDEX["score"]]
    s = np.clip(np.where(np.isnan(s), 0.5, s), 1e-3, 1 - 1e-3)
    return np.log(s / (1 - s))


class _Logistic:
    """L2 logistic regression on standardized features, missing values as the mean and
    a missing flag folded in (few rows: the small reviewers)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, l2: float) -> None:
        from sklearn.linear_model import LogisticRegression

        self.mean = np.nanmean(np.where(np.isnan(X).all(axis=0), 0.0, X), axis=0)
        self.mean = np.nan_to_num(self.mean)
        Z = self._prep(X, fit=True)
        self.model = LogisticRegression(C=1.0 / max(l2, 1e-6), max_iter=500)
        self.model.fit(Z, y)

    def _prep(self, X: np.ndarray, fit: bool = False) -> np.ndarray:
        miss = np.isnan(X)
        Z = np.where(miss, self.mean, X)
        Z = np.sign(Z) * np.log1p(np.abs(Z))  # counts and lengths: heavy tails
        if fit:
            self.mu, self.sd = Z.mean(axis=0), Z.std(axis=0) + 1e-9
        return np.hstack([(Z - self.mu) / self.sd, miss.astype(float)])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(self._prep(X))[:, 1]
