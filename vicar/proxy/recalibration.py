"""The confidence shown to the human, recalibrated on the proxy's own record.

The learned model's score ranks gates well but runs high for some reviewers (dev:
Guenter Roeck's answers were right 88% of the time where the score said 94%, and about
5 points under it in every bin), because it is fitted on the very answers it then
scores. The autonomy rule does not mind (it proves a threshold on the score, whatever
its scale), but the human reads the number as a probability. So the number shown is
the score passed through a logistic map (Platt scaling: a slope and an intercept on
the score's log-odds) fitted on the principal's latest human-graded pairs: each pair's
score was given before its answer came, so the fit is out of sample.

Deterministic in the store: the map is fitted on the pairs up to the last multiple of
REFIT_EVERY, so two processes (a worker restarted, the replay) show the same number
for the same pairs.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import deque
from collections.abc import Iterable

import numpy as np

from vicar.memory.store import RecordStore
from vicar.proxy.autonomy.ledger import autonomy_pairs

REFIT_EVERY = 50  # pairs between fits
LEAST = 100  # pairs (both right and wrong among them) before any map: until then the score itself
# A weak pull of the slope towards 1 and the intercept towards 0 (a prior worth this
# many pairs): keeps a fit on few, lopsided pairs near the identity, and finite when
# the pairs separate perfectly.
PRIOR_PAIRS = 2.0
_EPS = 1e-4


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1 - _EPS)
    return np.log(p / (1 - p))


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=float)))  # no overflow at any z


def _loss(X: np.ndarray, y: np.ndarray, w: np.ndarray, prior: np.ndarray) -> float:
    z = X @ w
    # -log-likelihood, stably: log(1 + e^z) - y z
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * PRIOR_PAIRS * np.sum((w - prior) ** 2))


def fit_platt(scores: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of P(correct) = sigmoid(slope * logit(score) + intercept), by
    damped Newton steps on the penalized log-likelihood (two parameters: a few steps)."""
    x = _logit(np.asarray(scores, dtype=float))
    y = np.asarray(correct, dtype=float)
    X = np.column_stack([x, np.ones_like(x)])
    prior = np.array([1.0, 0.0])
    w = prior.copy()
    loss = _loss(X, y, w, prior)
    for _ in range(100):
        p = _sigmoid(X @ w)
        grad = X.T @ (p - y) + PRIOR_PAIRS * (w - prior)
        hess = (X * (p * (1 - p))[:, None]).T @ X + PRIOR_PAIRS * np.eye(2)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-6 and (new := _loss(X, y, w - t * step, prior)) > loss:
            t /= 2  # halve until the loss goes down: Newton's full step can overshoot
        if t <= 1e-6:
            break
        w, loss = w - t * step, new
        if np.max(np.abs(t * step)) < 1e-9:
            break
    return float(w[0]), float(w[1])


class Recalibrator:
    """The map over one kind's latest `window` pairs, kept as they arrive."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.last_seq = 0
        self.count = 0
        self._pairs: deque[tuple[float, bool]] = deque(maxlen=max(window, 1))
        self.map: tuple[float, float] | None = None  # None: the score is shown as it is

    def extend(self, pairs: Iterable[tuple[int, float, bool]]) -> None:
        """Pairs (seq, score, correct) newer than `last_seq`, oldest first."""
        for seq, score, ok in pairs:
            self.last_seq = seq
            self._pairs.append((float(score), bool(ok)))
            self.count += 1
            if self.count % REFIT_EVERY == 0:
                self._refit()

    def _refit(self) -> None:
        if self.window <= 0 or len(self._pairs) < LEAST:
            return
        s = np.fromiter((p[0] for p in self._pairs), float, len(self._pairs))
        ok = np.fromiter((p[1] for p in self._pairs), bool, len(self._pairs))
        if ok.all() or not ok.any():
            return
        self.map = fit_platt(s, ok)


def shown(score: float, fitted: tuple[float, float] | None) -> float:
    """The confidence to show for a score under a fitted map (None: the score as it is;
    0 stays 0: no confidence to recalibrate)."""
    if fitted is None or score <= 0.0:
        return score
    a, b = fitted
    p = min(max(score, _EPS), 1 - _EPS)
    return 0.5 * (1.0 + math.tanh(0.5 * (a * math.log(p / (1 - p)) + b)))


# Per open store: its recalibrators by (kind, window), fed with the pairs added since.
_maps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_maps_lock = threading.Lock()


def confidence_map(store: RecordStore, kind: str, window: int) -> tuple[float, float] | None:
    """The principal's recalibration of the confidence shown, over the latest `window`
    pairs of the kind; None: none fitted yet, or off."""
    if window <= 0:
        return None
    with _maps_lock:
        maps = _maps.setdefault(store, {})
        recal = maps.get((kind, window))
        if recal is None:
            recal = maps[(kind, window)] = Recalibrator(window)
        recal.extend(autonomy_pairs(store, kind, after_seq=recal.last_seq))
        return recal.map
