"""The learned predictor's answer history and its features (one list, `FEATURES`).

Per principal, per lineage the last verdicts, their words and the artifact at each;
per context and upstream agent the base rates of each action; the memory vote's
features beside them. A history is rebuilt by replaying the human answers in log
order, so it is a pure function of the outcome log.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from vicar.memory.chunk import FACT_KINDS
from vicar.models import (
    Action,
    AnsweredBy,
    GateRequest,
    OutcomeRecord,
    PassResult,
    RequestKind,
    RetrievalContext,
)
from vicar.proxy.choose import Chooser, from_features
from vicar.proxy.facts import concern_words
from vicar.proxy.lineage import artifact_hash, lineage_of
from vicar.proxy.team import Own, kinds_of, outcome_of, team_from_features

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

_QUOTED = re.compile(r"'[^'\n]{1,80}'|\"[^\"\n]{1,80}\"|<[^<>\n]{1,200}>")
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_LIST_LINE = re.compile(r"^\s*(?:[-*]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_DIFF_LINE = re.compile(r"^[+-](?![+-]{2} )", re.MULTILINE)
_TOKEN = re.compile(r"[a-z][a-z0-9_]{2,30}")


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
MEMORY_FEATURES = (
    "mem_action",
    "mem_conf",
    "mem_sim1",
    "mem_sim2",
    "mem_sim3",
    "mem_n",
    "mem_top_action",
    "pref_n",
    "pref_unmet",
    "agent_trust",
)
HISTORY_FEATURES = (
    "lin_count",
    *(f"last{i}" for i in range(1, LAST_VERDICTS + 1)),
    *(f"last{i}_words" for i in range(1, LAST_VERDICTS + 1)),
    "changed",
    "header_changed",
    "revision_delta",
    "since",
    "revision",
    "position",
    "series_size",
    "cover",
    "art_chars",
    "art_lines",
    "list_lines",
    "diff_lines",
    *(f"{scope}_{a.value}" for scope in ("all", "ctx", "agent") for a in RATE_ACTIONS),
    "all_n",
    "ctx_n",
    "agent_n",
    "prev",
    "agent_last",
    "agent_since",
    *(f"txt_{i}" for i in range(TEXT_BUCKETS)),
)
FEATURES = HISTORY_FEATURES + MEMORY_FEATURES
CATEGORICAL = tuple(
    i
    for i, f in enumerate(FEATURES)
    if f.startswith("last") or f in ("prev", "agent_last", "mem_action", "mem_top_action")
)


def memory_features(
    vote: PassResult, ctx: RetrievalContext, artifact: str = "", trust: bool = False
) -> dict[str, float]:
    """What the memory vote said, how close the nearest human answers were, the human's
    retrieved preferences (how many, and the confidence of those whose subject the
    artifact does not mention: a want it may not meet), and with `trust` the upstream
    agent's trust score, the one place its regrets reach the model (PredictorParams:
    off, it is missing, and the model learns nothing from it)."""
    human = sorted(
        (c for c in ctx.chunks if c.answered_by is AnsweredBy.human and c.kind not in FACT_KINDS),
        key=lambda c: -(c.similarity or 0.0),
    )
    facts = [c for c in ctx.chunks if c.kind == "preference"]
    words = concern_words(artifact) if facts else set()
    sims = [c.similarity if c.similarity is not None else NAN for c in human[:3]]
    sims += [NAN] * (3 - len(sims))
    top = Action(human[0].outcome) if human and human[0].outcome in Action._value2member_map_ else None
    found = {
        "mem_action": float(ACTION_CODE[vote.action]) if vote.action else NAN,
        "mem_conf": vote.confidence,
        "mem_sim1": sims[0],
        "mem_sim2": sims[1],
        "mem_sim3": sims[2],
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
        # The most frequent words per (context, action), kept until those responses change:
        # a gate asks for every action's words, twice.
        self._frequent: dict[tuple[str, Action], str] = {}
        self.rows: list[np.ndarray] = []
        self.labels: list[Action] = []
        # A gate reads the same history features three times (prior, posterior, and as
        # its training row when the human answers): kept until the history or the
        # request's fields change.
        self._changes = 0
        self._last: tuple[tuple, np.ndarray] | None = None
        # The person's answers per kind of action (what a team shares of them; the team
        # prior's bias and their wish to be asked), and each candidate predictor's log-loss.
        self.own = Own()
        self.chooser = Chooser()

    @classmethod
    def from_records(cls, records: Iterable[OutcomeRecord]) -> "History":
        history = cls()
        for record in records:
            history.observe(record)
        return history

    def features(self, request: GateRequest, memory: dict[str, float] | None = None) -> np.ndarray:
        key = (
            self._changes,
            request.title,
            request.lineage,
            request.revision,
            request.artifact_text,
            request.upstream_agent,
            request.state,
            request.task_type,
        )
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
            seen = record.posterior.features if record.posterior else {}
            self.chooser.observe(from_features(seen), record.action.value)
            self.own.observe(kinds_of(req), outcome_of(record.action.value, record.ask_first), team_from_features(seen))
            for key in ("all", _context(req), f"agent|{req.upstream_agent}"):
                self.rates.setdefault(key, Counter())[record.action] += 1
            if words:
                for key in (_context(req), "all"):
                    said = self.responses.setdefault((key, record.action), Counter())
                    said[words] += 1
                    if len(said) > MAX_RESPONSE_KINDS:  # keep the frequent ones: bounded memory
                        self.responses[(key, record.action)] = Counter(dict(said.most_common(MAX_RESPONSE_KINDS // 2)))
                    self._frequent.pop((key, record.action), None)
                self.examples.setdefault(words, record.response_text.strip()[:RESPONSE_CHARS])
        if lin.lineage:
            self.lineages.setdefault(lin.lineage, deque(maxlen=LAST_VERDICTS)).append(
                _Verdict(
                    action=record.action,
                    words=bucket(words),
                    response=record.response_text[:RESPONSE_CHARS],
                    artifact=lin.artifact_hash,
                    header=_header(req.artifact_text),
                    revision=_revision_number(lin.revision),
                    at=self.n,
                )
            )
            self.lineage_counts[lin.lineage] += 1
        self.previous = record.action
        if req.upstream_agent:
            self.agent_last[req.upstream_agent] = (record.action, self.n)
        return human

    def words(self, request: GateRequest, actions: Iterable[Action]) -> dict[Action, str]:
        """For each of `actions`, what the human would say with it: the last verdict's
        words on this lineage when it was this action; else the human's most frequent
        words for this action in this context (or at all); else ""."""
        lin = lineage_of(request)
        past = self.lineages.get(lin.lineage) if lin.lineage else None
        last = past[-1] if past and past[-1].response.strip() else None
        context = _context(request)
        found: dict[Action, str] = {}
        for action in actions:
            if last is not None and last.action is action:
                found[action] = last.response.strip()
                continue
            found[action] = ""
            for key in (context, "all"):
                words = self._frequent.get((key, action))
                if words is None:
                    said = self.responses.get((key, action))
                    if not said:
                        continue
                    words = self._frequent[(key, action)] = max(said, key=lambda w: (said[w], w))
                found[action] = self.examples.get(words, "")
                break
        return found
