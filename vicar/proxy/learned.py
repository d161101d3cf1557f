"""The learned predictor: a per-principal gradient-boosted model over the human's own
answer history, wrapped around the memory vote.

A reviewer's next verdict is mostly their last verdict on the same lineage (a topic
branch, a patch and its rerolls) and whether the artifact changed since; the memory
vote alone does not see either. So each principal keeps an online history of human
answers (per lineage the last verdicts, their words and the artifact at each; per
context and upstream agent the base rates of each action) and a LightGBM model over
features of that history, the request's structure and the memory vote, refitted on a
fixed schedule. Until the first fit the memory vote answers.

The model is a pure function of the outcome log up to an answer count: a history is
rebuilt by replaying the human answers in log order (each record's posterior keeps the
memory-vote features the gate saw), and the fit is seeded and single-threaded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vicar.config import PredictorParams
from vicar.models import (
    Action,
    AnsweredBy,
    DialogTurn,
    GateRequest,
    OutcomeRecord,
    PassResult,
    RequestKind,
    RetrievalContext,
    Surprise,
    Usage,
)
from vicar.proxy.facts import concern_words
from vicar.proxy.lineage import artifact_hash, lineage_of
from vicar.proxy.offline import DEFAULT_TEXT, OfflinePredictor

# Fit at these human-answer counts, then every REFIT_EVERY answers.
SCHEDULE = (30, 60, 100, 150, 200)
REFIT_EVERY = 200
MODEL_FORMAT = 1  # bump when the feature list changes: older model files are not loaded

# The gate actions the base rates count; a model predicts whatever the human used.
RATE_ACTIONS = (Action.approve, Action.correct, Action.reject, Action.hold, Action.withdraw)
ACTION_CODE = {a: i for i, a in enumerate(Action)}
WORD_BUCKETS = 48  # a verdict's normalized first line, hashed: formulaic verdicts stay apart
LAST_VERDICTS = 3
MAX_RESPONSE_KINDS = 500  # distinct responses kept per (context, action) for the prose
RESPONSE_CHARS = 2000
# Title and artifact words, hashed (counts). Off: on the dev data 64 buckets changed
# prequential accuracy (refit every 1,000) by +0.002 (Guenter Roeck) and -0.001
# (Junio C Hamano) for 1.7x the fit time.
TEXT_BUCKETS = 0
TEXT_CHARS = 2000  # of the artifact read for them

LIGHTGBM = dict(
    # Chosen on the dev data (prequential, refit every 1,000): 60 rounds at 0.1 fit in
    # half the time of 150 at 0.05 with the same accuracy, and 30 answers per leaf keep
    # the early fits from overfitting (Junio C Hamano 0.827 -> 0.840).
    objective="multiclass", num_leaves=15, learning_rate=0.1, min_data_in_leaf=30, max_bin=63,
    feature_pre_filter=False, num_threads=1, deterministic=True, force_row_wise=True,
    seed=0, verbose=-1,
)
TREES = 60

_QUOTED = re.compile(r"'[^'\n]{1,80}'|\"[^\"\n]{1,80}\"|<[^<>\n]{1,200}>")
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_LIST_LINE = re.compile(r"^\s*(?:[-*]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_DIFF_LINE = re.compile(r"^[+-](?![+-]{2} )", re.MULTILINE)
_TOKEN = re.compile(r"[a-z][a-z0-9_]{2,30}")


def refit_due(n_answers: int) -> bool:
    """Whether the model is refitted once the principal has this many human answers."""
    return n_answers in SCHEDULE or (n_answers > SCHEDULE[-1] and n_answers % REFIT_EVERY == 0)


def normalize(text: str) -> str:
    """A verdict's first line, lowercased, with numbers and quoted names (topics,
    addresses, message ids) folded: "Will merge to 'next'." stays itself,
    "Superseded by 'ab/other'." becomes "superseded by '_'."."""
    line = next((ln for ln in text[:RESPONSE_CHARS].splitlines() if ln.strip()), "")[:200]

    def fold(m: re.Match) -> str:
        inner = m.group(0)[1:-1]
        return "'_'" if re.search(r"[/@\d]", inner) or len(inner) > 20 else m.group(0)

    return _SPACE.sub(" ", _DIGITS.sub("0", _QUOTED.sub(fold, line.lower()))).strip()


def bucket(text: str, n: int = WORD_BUCKETS) -> int:
    # blake2b, not hash(): Python's string hash is salted per process.
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big") % n


def _revision_number(revision: str) -> float:
    m = _DIGITS.search(revision or "")
    return float(m.group(0)) if m else 1.0


# -- the feature list (one place) ---------------------------------------------------

NAN = float("nan")
MEMORY_FEATURES = ("mem_action", "mem_conf", "mem_sim1", "mem_sim2", "mem_sim3", "mem_n", "mem_top_action",
                   "pref_n", "pref_unmet", "agent_trust")
HISTORY_FEATURES = (
    "lin_count", *(f"last{i}" for i in range(1, LAST_VERDICTS + 1)),
    *(f"last{i}_words" for i in range(1, LAST_VERDICTS + 1)),
    "changed", "header_changed", "revision_delta", "since",
    "revision", "position", "series_size", "cover", "art_chars", "art_lines", "list_lines", "diff_lines",
    *(f"{scope}_{a.value}" for scope in ("all", "ctx", "agent") for a in RATE_ACTIONS),
    "all_n", "ctx_n", "agent_n", "prev", "agent_last", "agent_since",
    *(f"txt_{i}" for i in range(TEXT_BUCKETS)),
)
FEATURES = HISTORY_FEATURES + MEMORY_FEATURES
CATEGORICAL = tuple(
    i for i, f in enumerate(FEATURES)
    if f.startswith("last") or f in ("prev", "agent_last", "mem_action", "mem_top_action")
)


def memory_features(vote: PassResult, ctx: RetrievalContext, artifact: str = "",
                    trust: bool = False) -> dict[str, float]:
    """What the memory vote said, how close the nearest human answers were, the human's
    retrieved preferences (how many, and the confidence of those whose subject the
    artifact does not mention: a want it may not meet), and with `trust` the upstream
    agent's trust score, the one place its regrets reach the model (PredictorParams:
    off, it is missing, and the model learns nothing from it)."""
    human = sorted((c for c in ctx.chunks if c.answered_by is AnsweredBy.human and not c.is_fact),
                   key=lambda c: -(c.similarity or 0.0))
    facts = [c for c in ctx.chunks if c.kind == "preference"]
    words = concern_words(artifact) if facts else set()
    sims = [c.similarity if c.similarity is not None else NAN for c in human[:3]]
    sims += [NAN] * (3 - len(sims))
    top = Action(human[0].outcome) if human and human[0].outcome in Action._value2member_map_ else None
    found = {
        "mem_action": float(ACTION_CODE[vote.action]) if vote.action else NAN,
        "mem_conf": vote.confidence,
        "mem_sim1": sims[0], "mem_sim2": sims[1], "mem_sim3": sims[2],
        "mem_n": float(len(human)),
        "mem_top_action": float(ACTION_CODE[top]) if top else NAN,
        "pref_n": float(len(facts)),
        "pref_unmet": sum((c.confidence or 0.0) for c in facts if c.question not in words),
        "agent_trust": NAN if ctx.agent_trust is None or not trust else ctx.agent_trust,
    }
    # Missing ones are left out (read back as missing): NaN has no JSON spelling.
    return {k: v for k, v in found.items() if not np.isnan(v)}


@dataclass(frozen=True)
class _Verdict:
    action: Action
    words: int
    response: str
    artifact: str  # artifact hash at the verdict
    header: str  # hash of the artifact's first line (a topic header, a subject)
    revision: float
    at: int  # the principal's human-answer count when it was given


def _header(text: str) -> str:
    return artifact_hash(next((ln for ln in text.splitlines() if ln.strip()), ""))


def _context(request: GateRequest) -> str:
    return f"{request.state.value}|{request.task_type}"


class History:
    """A principal's human gate answers, online: what the features read, and the
    training rows (the features each answer was predicted from, with its action)."""

    def __init__(self) -> None:
        self.n = 0
        self.lineages: dict[str, deque[_Verdict]] = {}
        self.lineage_counts: Counter[str] = Counter()
        self.rates: dict[str, Counter[Action]] = {}
        # The verdict just before and the last one on the same upstream agent: a series'
        # patches arrive together from one author and are often judged alike.
        self.previous: Action | None = None
        self.agent_last: dict[str, tuple[Action, int]] = {}
        self.responses: dict[tuple[str, Action], Counter[str]] = {}
        self.examples: dict[str, str] = {}  # normalized -> the human's original words
        self.rows: list[np.ndarray] = []
        self.labels: list[Action] = []
        # A gate reads the same history features three times (prior, posterior, and as
        # its training row when the human answers): kept until the history or the
        # request's fields change.
        self._changes = 0
        self._last: tuple[tuple, np.ndarray] | None = None

    @classmethod
    def from_records(cls, records: Iterable[OutcomeRecord]) -> "History":
        history = cls()
        for record in records:
            history.observe(record)
        return history

    def features(self, request: GateRequest, memory: dict[str, float] | None = None) -> np.ndarray:
        key = (self._changes, request.title, request.lineage, request.revision, request.artifact_text,
               request.upstream_agent, request.state, request.task_type)
        if self._last is None or self._last[0] != key:
            self._last = (key, self._history_features(request))
        memory = memory or {}
        return np.concatenate([self._last[1], [float(memory.get(name, NAN)) for name in MEMORY_FEATURES]])

    def _history_features(self, request: GateRequest) -> np.ndarray:
        # The request's own text, not the artifact files: the log keeps only the request,
        # and the model must be rebuildable from it.
        text = request.artifact_text
        lin = lineage_of(request)
        past = self.lineages.get(lin.lineage) if lin.lineage else None
        verdicts = list(reversed(past)) if past else []
        last = verdicts[0] if verdicts else None
        revision = _revision_number(lin.revision)
        f: dict[str, float] = {
            "lin_count": float(self.lineage_counts[lin.lineage]) if lin.lineage else NAN,
            "changed": NAN if last is None else float(last.artifact != lin.artifact_hash),
            "header_changed": NAN if last is None else float(last.header != _header(text)),
            "revision_delta": NAN if last is None else revision - last.revision,
            "since": NAN if last is None else float(self.n - last.at),
            "revision": revision,
            "position": NAN if lin.position is None else float(lin.position),
            "series_size": NAN if lin.series_size is None else float(lin.series_size),
            "cover": NAN if lin.position is None else float(lin.position == 0),
            "art_chars": float(len(text)),
            "art_lines": float(text.count("\n")),
            "list_lines": float(len(_LIST_LINE.findall(text))),
            "diff_lines": float(len(_DIFF_LINE.findall(text))),
        }
        for i in range(LAST_VERDICTS):
            v = verdicts[i] if i < len(verdicts) else None
            f[f"last{i + 1}"] = NAN if v is None else float(ACTION_CODE[v.action])
            f[f"last{i + 1}_words"] = NAN if v is None else float(v.words)
        f["prev"] = NAN if self.previous is None else float(ACTION_CODE[self.previous])
        agent_last = self.agent_last.get(request.upstream_agent) if request.upstream_agent else None
        f["agent_last"] = NAN if agent_last is None else float(ACTION_CODE[agent_last[0]])
        f["agent_since"] = NAN if agent_last is None else float(self.n - agent_last[1])
        if TEXT_BUCKETS:
            words = np.zeros(TEXT_BUCKETS)
            for token in _TOKEN.findall(f"{request.title} {text[:TEXT_CHARS]}".lower()):
                words[bucket(token, TEXT_BUCKETS)] += 1.0
            f.update({f"txt_{i}": w for i, w in enumerate(words)})
        for scope, key in (("all", "all"), ("ctx", _context(request)), ("agent", f"agent|{request.upstream_agent}")):
            counts = self.rates.get(key, Counter())
            total = sum(counts.values())
            f[f"{scope}_n"] = float(total)
            for a in RATE_ACTIONS:
                f[f"{scope}_{a.value}"] = counts[a] / total if total else NAN
        return np.array([f.get(name, NAN) for name in HISTORY_FEATURES], dtype=np.float64)

    def observe(self, record: OutcomeRecord) -> bool:
        """Take one recorded outcome. Only the human's answers to gates teach (training
        rows, base rates, words); the proxy's own answers are still what happened to
        their thread, so they move the lineage's last verdict (and the previous and the
        agent's last) as the human's do. True when the record taught."""
        req = record.request
        if req.kind is not RequestKind.gate:
            return False
        human = record.answered_by is AnsweredBy.human
        lin = lineage_of(req)
        words = normalize(record.response_text)
        if human:  # the row is read from the history before this record
            memory = record.posterior.features if record.posterior else {}
            self.rows.append(self.features(req, memory))
        self._changes += 1  # from here on the cached features are stale
        if human:
            self.labels.append(record.action)
            self.n += 1
            for key in ("all", _context(req), f"agent|{req.upstream_agent}"):
                self.rates.setdefault(key, Counter())[record.action] += 1
            if words:
                for key in (_context(req), "all"):
                    said = self.responses.setdefault((key, record.action), Counter())
                    said[words] += 1
                    if len(said) > MAX_RESPONSE_KINDS:  # keep the frequent ones: bounded memory
                        self.responses[(key, record.action)] = Counter(dict(said.most_common(MAX_RESPONSE_KINDS // 2)))
                self.examples.setdefault(words, record.response_text.strip()[:RESPONSE_CHARS])
        if lin.lineage:
            self.lineages.setdefault(lin.lineage, deque(maxlen=LAST_VERDICTS)).append(_Verdict(
                action=record.action, words=bucket(words), response=record.response_text[:RESPONSE_CHARS],
                artifact=lin.artifact_hash, header=_header(req.artifact_text),
                revision=_revision_number(lin.revision), at=self.n,
            ))
            self.lineage_counts[lin.lineage] += 1
        self.previous = record.action
        if req.upstream_agent:
            self.agent_last[req.upstream_agent] = (record.action, self.n)
        return human

    def prose(self, request: GateRequest, action: Action) -> str:
        """The last verdict's words on this lineage when it was this action; else the
        human's most frequent words for this action in this context (or at all)."""
        lin = lineage_of(request)
        past = self.lineages.get(lin.lineage) if lin.lineage else None
        if past and past[-1].action is action and past[-1].response.strip():
            return past[-1].response.strip()
        for key in (_context(request), "all"):
            said = self.responses.get((key, action))
            if said:
                words = max(said, key=lambda w: (said[w], w))
                return self.examples.get(words, "")
        return ""


# -- the model ------------------------------------------------------------------------


class Model:
    """A fitted model: class probabilities for a feature row."""

    def __init__(self, classes: Sequence[Action], version: int, learner: str, booster=None,
                 constant: Sequence[float] | None = None) -> None:
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
        meta = {"format": MODEL_FORMAT, "version": self.version, "learner": self.learner,
                "classes": [c.value for c in self.classes], "features": list(FEATURES),
                "schedule": list(SCHEDULE), "refit_every": REFIT_EVERY,
                "constant": self.constant.tolist() if self.constant is not None else None}
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
        return cls([Action(c) for c in meta["classes"]], meta["version"], meta["learner"], booster,
                   meta["constant"])


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

        data = lgb.Dataset(rows, y, feature_name=list(FEATURES), categorical_feature=list(CATEGORICAL),
                           params={"verbose": -1, "max_bin": LIGHTGBM["max_bin"]})
        booster = lgb.train({**LIGHTGBM, "num_class": len(classes)}, data, num_boost_round=TREES)
        return Model(classes, version, learner, booster)
    if learner == "sklearn":
        from sklearn.ensemble import HistGradientBoostingClassifier
        from threadpoolctl import threadpool_limits

        mask = np.zeros(len(FEATURES), dtype=bool)
        mask[list(CATEGORICAL)] = True
        est = HistGradientBoostingClassifier(
            max_iter=TREES, max_leaf_nodes=LIGHTGBM["num_leaves"], learning_rate=LIGHTGBM["learning_rate"],
            min_samples_leaf=LIGHTGBM["min_data_in_leaf"], categorical_features=mask, max_bins=LIGHTGBM["max_bin"],
            early_stopping=False, random_state=0,
        )
        # An all-missing column (no memory vote yet) trips its binning; constant is the same.
        rows = np.where(np.isnan(rows).all(axis=0), 0.0, rows)
        with threadpool_limits(1):
            est.fit(rows, y)
        return Model(classes, version, learner, est)
    raise ValueError(f"unknown learner {learner!r}")


# -- the predictor --------------------------------------------------------------------


class LearnedPredictor:
    """The Predictor interface over the learned model, the memory vote underneath."""

    name = "learned"
    local = True  # milliseconds per step, like the offline predictor

    def __init__(self, params: PredictorParams | None = None, history: History | None = None,
                 learner: str = "lightgbm", refit: bool = True) -> None:
        self.vote = OfflinePredictor(params)
        self.trust_feature = (params or PredictorParams()).trust_feature
        self.history = history or History()
        self.learner = learner
        self.refit = refit  # False: a caller (an activity) decides when to fit
        self.model: Model | None = None

    @classmethod
    def from_log(cls, rows: Iterable[tuple[int, str]], params: PredictorParams | None = None,
                 **kw) -> "LearnedPredictor":
        """From a principal's outcome log (`RecordStore.outcomes(answered_by="human")`),
        fitted as it would have been online at the last scheduled count."""
        predictor = cls(params, History.from_records(OutcomeRecord.model_validate_json(r) for _, r in rows), **kw)
        scheduled = [k for k in range(1, predictor.history.n + 1) if refit_due(k)]
        if scheduled:
            predictor.model = fit(predictor.history, scheduled[-1], predictor.learner)
        return predictor

    # -- the Predictor interface -------------------------------------------------------

    def prior(self, request: GateRequest, ctx: RetrievalContext, dialog: Sequence[DialogTurn] = ()) -> PassResult:
        return self._predict(request, ctx)

    def posterior(self, request: GateRequest, ctx: RetrievalContext, artifact: str, prior: PassResult,
                  dialog: Sequence[DialogTurn] = ()) -> PassResult:
        return self._predict(request, ctx)

    def surprise(self, request: GateRequest, artifact: str, prior: PassResult, posterior: PassResult,
                 ctx: RetrievalContext) -> Surprise:
        return self.vote.surprise(request, artifact, prior, posterior, ctx)

    def agent_reply(self, request: GateRequest, artifact: str,
                    dialog: Sequence[DialogTurn]) -> tuple[str, Usage | None]:
        return self.vote.agent_reply(request, artifact, dialog)

    # -- learning ------------------------------------------------------------------

    def refit_due(self, n_answers: int | None = None) -> bool:
        return refit_due(self.history.n if n_answers is None else n_answers)

    def fit(self, n_answers: int | None = None) -> Model | None:
        self.model = fit(self.history, n_answers, self.learner)
        return self.model

    def observe(self, record: OutcomeRecord) -> None:
        """One recorded outcome; refits when the schedule says so (unless refit=False)."""
        if self.history.observe(record) and self.refit and refit_due(self.history.n):
            self.fit()

    def save(self, directory: Path) -> Path | None:
        return self.model.save(directory) if self.model else None

    def load(self, directory: Path, version: int | None = None) -> Model | None:
        self.model = Model.load(directory, version)
        return self.model

    # -- internals ----------------------------------------------------------------

    def _predict(self, request: GateRequest, ctx: RetrievalContext) -> PassResult:
        vote = self.vote.prior(request, ctx)
        memory = memory_features(vote, ctx, request.artifact_text, trust=self.trust_feature)
        vote.features = memory
        if self.model is None or request.kind is not RequestKind.gate:
            return vote  # before the first fit (and for questions) the memory vote answers
        probs = self.model.proba(self.history.features(request, memory))[0]
        best = int(np.argmax(probs))
        action = self.model.classes[best]
        prose = self.history.prose(request, action) or (
            vote.prose if vote.action is action else DEFAULT_TEXT.get(action, ""))
        return PassResult(
            prose=prose, confidence=round(float(probs[best]), 4), action=action,
            note=f"learned model v{self.model.version} ({self.learner}); memory vote "
                 f"{vote.action.value if vote.action else 'none'} at {vote.confidence:.2f}",
            used_chunk_ids=vote.used_chunk_ids, features=memory,
        )
