"""The learned predictor's model: fitted on a principal's answer history on a fixed
schedule, seeded and single-threaded (a pure function of the first n human answers),
saved beside the principal's memory as `v<answers>.txt`/`.json`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vicar.models import Action
from vicar.proxy.learned_history import ACTION_CODE, CATEGORICAL, FEATURES, History

# Fit at these human-answer counts, then every REFIT_EVERY answers.
SCHEDULE = (30, 60, 100, 150, 200)
REFIT_EVERY = 200
MODEL_FORMAT = 1  # bump when the feature list changes: older model files are not loaded

MIN_LEAF = 30  # answers per leaf on a long history (leaf_size: fewer in the first fits)
LIGHTGBM = dict(
    # Chosen on the dev data (prequential, refit every 1,000): 60 rounds at 0.1 fit in
    # half the time of 150 at 0.05 with the same accuracy, and 30 answers per leaf keep
    # the early fits from overfitting (Junio C Hamano 0.827 -> 0.840).
    objective="multiclass",
    num_leaves=15,
    learning_rate=0.1,
    min_data_in_leaf=MIN_LEAF,
    max_bin=63,
    feature_pre_filter=False,
    num_threads=1,
    deterministic=True,
    force_row_wise=True,
    seed=0,
    verbose=-1,
)
TREES = 60
# A leaf's fewest answers grows with the history: the 30 above, chosen on long histories,
# let no split at all in the first fits (30 answers cannot make two leaves of 30), so the
# model answered every gate with the person's overall rate (the demo's 0.83 plateau: a
# habit of 15 identical approvals never earned more). A third of the answers, at least 10:
# a tenth (at least 5) split as well but overfitted the first fits (Guenter Roeck's ECE
# 0.046 -> 0.056 on dev; 0.039 with a third).
LEAF_SHARE, LEAF_FLOOR = 3, 10


def leaf_size(n_answers: int) -> int:
    return max(LEAF_FLOOR, min(MIN_LEAF, n_answers // LEAF_SHARE))


def refit_due(n_answers: int) -> bool:
    """Whether the model is refitted once the principal has this many human answers."""
    return n_answers in SCHEDULE or (n_answers > SCHEDULE[-1] and n_answers % REFIT_EVERY == 0)


# -- the model ------------------------------------------------------------------------


class Model:
    """A fitted model: class probabilities for a feature row."""

    def __init__(
        self,
        classes: Sequence[Action],
        version: int,
        learner: str,
        booster=None,
        constant: Sequence[float] | None = None,
    ) -> None:
        self.classes = list(classes)
        self.version = version  # the human-answer count it was fitted on
        self.learner = learner
        self.booster = booster
        self.constant = np.asarray(constant, dtype=np.float64) if constant is not None else None

    def proba(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        if self.constant is not None:
            return np.tile(self.constant, (len(rows), 1))
        if self.learner == "lightgbm":
            return self.booster.predict(rows, num_threads=1)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            return self.booster.predict_proba(rows)

    def save(self, directory: Path) -> Path:
        """`v<answers>.txt` (the LightGBM model) and `v<answers>.json` (features,
        classes, schedule), so a gate can record the version it used."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.learner != "lightgbm":
            raise ValueError("only LightGBM models are saved (the learner in use)")
        meta = {
            "format": MODEL_FORMAT,
            "version": self.version,
            "learner": self.learner,
            "classes": [c.value for c in self.classes],
            "features": list(FEATURES),
            "schedule": list(SCHEDULE),
            "refit_every": REFIT_EVERY,
            "constant": self.constant.tolist() if self.constant is not None else None,
        }
        if self.booster is not None:
            (directory / f"v{self.version}.txt").write_text(self.booster.model_to_string())
        path = directory / f"v{self.version}.json"
        path.write_text(json.dumps(meta, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, directory: Path, version: int | None = None) -> "Model | None":
        """The given version, or the newest one saved; None when there is none usable."""
        if version is None:
            versions = sorted(int(p.stem[1:]) for p in directory.glob("v*.json") if p.stem[1:].isdigit())
            if not versions:
                return None
            version = versions[-1]
        meta = json.loads((directory / f"v{version}.json").read_text())
        if meta.get("format") != MODEL_FORMAT or meta.get("features") != list(FEATURES):
            return None  # fitted on another feature list: refit from the log instead
        booster = None
        if meta["constant"] is None:
            import lightgbm as lgb

            booster = lgb.Booster(model_str=(directory / f"v{version}.txt").read_text())
        return cls([Action(c) for c in meta["classes"]], meta["version"], meta["learner"], booster, meta["constant"])


def fit(history: History, n_answers: int | None = None, learner: str = "lightgbm") -> Model | None:
    """The model fitted on the first `n_answers` human answers (all by default): a pure
    function of them. None when there are none."""
    n = len(history.rows) if n_answers is None else min(n_answers, len(history.rows))
    if n == 0:
        return None
    return fit_rows(np.vstack(history.rows[:n]), history.labels[:n], learner)


def fit_rows(rows: np.ndarray, labels: Sequence[Action], learner: str = "lightgbm") -> Model:
    counts = Counter(labels)
    classes = sorted(counts, key=lambda a: ACTION_CODE[a])
    version = len(labels)
    if len(classes) == 1:
        return Model(classes, version, learner, constant=[1.0])
    index = {a: i for i, a in enumerate(classes)}
    y = np.array([index[a] for a in labels])
    if learner == "lightgbm":
        import lightgbm as lgb

        data = lgb.Dataset(
            rows,
            y,
            feature_name=list(FEATURES),
            categorical_feature=list(CATEGORICAL),
            params={"verbose": -1, "max_bin": LIGHTGBM["max_bin"]},
        )
        leaf = leaf_size(len(labels))
        params = {**LIGHTGBM, "num_class": len(classes), "min_data_in_leaf": leaf, "min_data_per_group": leaf}
        booster = lgb.train(params, data, num_boost_round=TREES)
        return Model(classes, version, learner, booster)
    if learner == "sklearn":
        from sklearn.ensemble import HistGradientBoostingClassifier
        from threadpoolctl import threadpool_limits

        mask = np.zeros(len(FEATURES), dtype=bool)
        mask[list(CATEGORICAL)] = True
        est = HistGradientBoostingClassifier(
            max_iter=TREES,
            max_leaf_nodes=LIGHTGBM["num_leaves"],
            learning_rate=LIGHTGBM["learning_rate"],
            min_samples_leaf=leaf_size(len(labels)),
            categorical_features=mask,
            max_bins=LIGHTGBM["max_bin"],
            early_stopping=False,
            random_state=0,
        )
        # An all-missing column (no memory vote yet) trips its binning; constant is the same.
        rows = np.where(np.isnan(rows).all(axis=0), 0.0, rows)
        with threadpool_limits(1):
            est.fit(rows, y)
        return Model(classes, version, learner, est)
    raise ValueError(f"unknown learner {learner!r}")
