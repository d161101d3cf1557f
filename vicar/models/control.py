"""Rules the human writes, and the off switch (pauses): the models, the changes the
brain's `control` update applies, and the linear-time regex compiler. Pydantic, the
standard library and re2 only: vicar/models/brain.py carries a Control in every turn
reply, and the workflow sandbox imports it. The matching is vicar/proxy/rules.py.

A principal's Control lives in their brain workflow, changed by a validated update
(workflows/brain.py) and handed to each gate with its turn, so a change holds from the
very next gate on any worker. re2 is a C extension with no I/O; the sandbox passes it
through.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from enum import Enum
from typing import Literal

import re2
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vicar.models.default_rules import AUTHOR as DEFAULT_AUTHOR
from vicar.models.default_rules import SPECS as DEFAULT_SPECS
from vicar.models.default_rules import is_default
from vicar.models.limits import NAME_CHARS, PATH_CHARS, TASK_TYPE_CHARS, TITLE_CHARS
from vicar.models.vocabulary import CfAState

# Bounds. The whole Control rides in every gate's turn reply and in the brain's state
# carried across continue-as-new, so it is bounded as a whole (JSON bytes), and each
# list and text is bounded so one rule cannot take all of it.
MAX_RULES = 50
MAX_PAUSES = 50
MAX_CONTROL_BYTES = 64_000
MAX_TERMS = 20  # values per match field (states, task types, agents, lineages, globs, words)
MAX_WORD_CHARS = 200
MAX_REGEX_CHARS = 500  # a person's rule's regex
# Any rule's, Vicar's default rules included (vicar/models/default_rules.py): a rule rides
# in every Verdict and turn reply, and a stored one must always decode.
MAX_STORED_REGEX_CHARS = 2000
MAX_TEXT_CHARS = 2000  # the words an answer rule's answer carries
WHO_CHARS = 64  # as a responder's name (vicar.models.RESPONDER_MAX_CHARS)
RULE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# re2 compiles into a bounded program: a pattern needing more memory is refused.
RE2_MAX_MEM = 8 << 20


def check_responder(value: str) -> str:
    """Who wrote a rule or paused: a name as a responder's (vicar.models imports this
    module through vicar/models/brain.py, so its own check cannot be imported here)."""
    name = value.strip()
    if not name or len(name) > WHO_CHARS or not name.isprintable():
        raise ValueError(f"invalid name {value[:WHO_CHARS]!r}: 1-{WHO_CHARS} printable characters")
    return name


class Effect(str, Enum):
    ask = "ask"  # always escalate, the rule's name shown as the reason
    approve = "approve"  # answer approve, by the rule (never the proxy's evidence)
    reject = "reject"
    # The person's own error target for the gates it matches (e.g. 0.01 on database
    # migrations): the proxy answers them alone only where this target's own bound holds
    # as well as the pooled one (vicar/proxy/autonomy/targets.py). It never decides a gate.
    target = "target"


def _options() -> re2.Options:
    o = re2.Options()
    o.log_errors = False  # a refused pattern is one line to the user, not a log line from C++
    o.max_mem = RE2_MAX_MEM
    return o


@functools.lru_cache(maxsize=512)
def compile_regex(pattern: str) -> re2._Regexp:
    """A linear-time regular expression, or ValueError in one line (re2 refuses what
    could backtrack: back-references, look-arounds)."""
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"regex {pattern[:80]!r} is refused (linear-time RE2 syntax only): {why}") from None


@functools.lru_cache(maxsize=512)
def word_regex(words: str) -> re2._Regexp:
    """A word or phrase, case-insensitive, any whitespace between its words, on word
    boundaries where it starts or ends with a letter or digit ("DROP TABLE" does not
    hit "DROP TABLES"; "rm -rf" still hits "rm -rf /")."""
    parts = words.split()
    body = r"\s+".join(re.escape(p) for p in parts)
    start = r"\b" if re.match(r"\w", parts[0]) else ""
    end = r"\b" if re.search(r"\w$", parts[-1]) else ""
    return compile_regex(f"(?i){start}{body}{end}")


def _terms(values: list[str], limit: int, what: str) -> list[str]:
    out = [v.strip() for v in values]
    if len(out) > MAX_TERMS:
        raise ValueError(f"at most {MAX_TERMS} {what}")
    for v in out:
        if not v or len(v) > limit or not v.isprintable():
            raise ValueError(f"each of {what} is 1-{limit} printable characters")
    return out


class Rule(BaseModel):
    """One rule: every condition given must hold (within one, any value may); a rule
    needs at least one condition. Words and the regex look at `text_in`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique per principal; shown as the escalation's reason.")
    effect: Effect
    author: str = Field("", description="Who wrote it (an answer rule's answers are recorded as theirs).")
    created: datetime | None = Field(None, description="When the brain took it (workflow time).")
    states: list[CfAState] = Field(default_factory=list)
    task_types: list[str] = Field(default_factory=list)
    upstream_agents: list[str] = Field(default_factory=list)
    lineages: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list, description="Globs over the artifact paths (* crosses /).")
    words: list[str] = Field(default_factory=list, description="Words or phrases, case-insensitive, whole words.")
    regex: str | None = Field(None, description="An RE2 (linear-time) regular expression.")
    text_in: Literal["artifact", "question", "both"] = "both"
    text: str = Field("", description="The answer's words (approve/reject rules).")
    target: float | None = Field(
        None, gt=0.0, lt=1.0, description="A target rule's error target for the gates it matches (e.g. 0.01)."
    )
    why: str = Field("", max_length=MAX_WORD_CHARS, description="Why it asks, in words shown on the card.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not RULE_NAME_RE.match(v):
            raise ValueError(
                f"invalid rule name {v[:70]!r}: 1-64 letters, digits, . _ - (starting with one of the first)"
            )
        return v

    @field_validator("author")
    @classmethod
    def _author(cls, v: str) -> str:
        return check_responder(v) if v.strip() else ""

    @field_validator("task_types")
    @classmethod
    def _task_types(cls, v: list[str]) -> list[str]:
        return [t.lower() for t in _terms(v, TASK_TYPE_CHARS, "task types")]

    @field_validator("upstream_agents")
    @classmethod
    def _agents(cls, v: list[str]) -> list[str]:
        return _terms(v, NAME_CHARS, "upstream agents")

    @field_validator("lineages")
    @classmethod
    def _lineages(cls, v: list[str]) -> list[str]:
        return _terms(v, TITLE_CHARS, "lineages")

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        return _terms(v, PATH_CHARS // 16, "path globs")

    @field_validator("words")
    @classmethod
    def _words(cls, v: list[str]) -> list[str]:
        return [" ".join(w.split()) for w in _terms(v, MAX_WORD_CHARS, "words")]

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if len(v) > MAX_STORED_REGEX_CHARS:
            raise ValueError(f"a regex is at most {MAX_REGEX_CHARS} characters")
        compile_regex(v)
        return v

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if len(v) > MAX_TEXT_CHARS:
            raise ValueError(f"a rule's answer text is at most {MAX_TEXT_CHARS} characters")
        return v.strip()

    @field_validator("states", mode="after")
    @classmethod
    def _states(cls, v: list[CfAState]) -> list[CfAState]:
        if len(v) > MAX_TERMS:
            raise ValueError(f"at most {MAX_TERMS} states")
        return v

    @model_validator(mode="after")
    def _some_condition(self) -> Rule:
        if not (
            self.states
            or self.task_types
            or self.upstream_agents
            or self.lineages
            or self.paths
            or self.words
            or self.regex
        ):
            raise ValueError(
                "a rule needs at least one condition (state, task type, agent, lineage, path, words or regex); "
                "to stop the proxy for everything, pause the principal"
            )
        return self

    @model_validator(mode="after")
    def _target_with_its_effect(self) -> Rule:
        if self.effect is Effect.target and self.target is None:
            raise ValueError("a target rule needs its target error (--target), e.g. 0.01")
        if self.effect is not Effect.target and self.target is not None:
            raise ValueError(f"a target error goes with the effect target, not {self.effect.value}")
        return self

    def same_as(self, other: Rule) -> bool:
        """The same rule, whoever wrote it and whenever (a retried add)."""
        skip = {"author", "created"}
        return self.model_dump(exclude=skip) == other.model_dump(exclude=skip)


def describe(r: Rule) -> str:
    """A rule's conditions in words (the CLI, the health report and the inbox say it alike)."""
    parts = [
        ("state", [s.value for s in r.states]),
        ("task type", r.task_types),
        ("agent", r.upstream_agents),
        ("lineage", r.lineages),
        ("path", r.paths),
        (f"words in the {r.text_in}", [json.dumps(w) for w in r.words]),
        (f"regex in the {r.text_in}", [json.dumps(r.regex)] if r.regex else []),
    ]
    return " and ".join(f"{what} is {' or '.join(vals)}" for what, vals in parts if vals)


def _default(name: str, why: str, regex: str) -> Rule:
    """One of Vicar's default rules (its pattern may be longer than a person's: it does not
    come in from outside)."""
    return Rule(name=name, effect=Effect.ask, author=DEFAULT_AUTHOR, regex=regex, why=why)


DEFAULT_RULES: tuple[Rule, ...] = tuple(_default(*spec) for spec in DEFAULT_SPECS)


class Pause(BaseModel):
    """The off switch: no gate in scope is answered but by the human. Scope None: all."""

    model_config = ConfigDict(extra="forbid")

    by: str
    at: datetime | None = None
    state: CfAState | None = None
    task_type: str | None = Field(None, max_length=TASK_TYPE_CHARS)

    @field_validator("by")
    @classmethod
    def _by(cls, v: str) -> str:
        return check_responder(v)

    @field_validator("task_type")
    @classmethod
    def _task_type(cls, v: str | None) -> str | None:
        return v.strip().lower() or None if v is not None else None

    def covers(self, state: CfAState, task_type: str) -> bool:
        return (self.state is None or self.state is state) and (self.task_type is None or self.task_type == task_type)

    def scope(self) -> str:
        parts = [p for p in (self.state.value if self.state else None, self.task_type) if p]
        return " / ".join(parts) or "all gates"

    def reason(self) -> str:
        when = self.at.strftime("%Y-%m-%d %H:%M:%S UTC") if self.at else "?"
        return f"paused by {self.by} at {when}" + (
            "" if self.state is None and self.task_type is None else f" ({self.scope()})"
        )


class Control(BaseModel):
    """A principal's rules (in the order added) and pauses, and which of Vicar's default
    rules (vicar/models/default_rules.py) they removed."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule] = Field(default_factory=list)
    pauses: list[Pause] = Field(default_factory=list)
    version: int = 0  # one more per change: the kept copy is never overwritten by an older one
    removed_defaults: list[str] = Field(default_factory=list, max_length=MAX_RULES)

    def empty(self) -> bool:
        return not self.rules and not self.pauses and not self.removed_defaults

    def in_force(self) -> list[Rule]:
        """The rules a gate is checked against: the person's own, in the order added (so
        their `ask` rule names the reason first), then the default rules they kept."""
        removed = set(self.removed_defaults)
        return self.rules + [r for r in DEFAULT_RULES if r.name not in removed]

    def rule_named(self, name: str) -> Rule | None:
        return next((r for r in self.in_force() if r.name == name), None)

    def pause_for(self, state: CfAState, task_type: str) -> Pause | None:
        return next((p for p in self.pauses if p.covers(state, task_type)), None)


class ControlChange(BaseModel):
    """One change, sent to the brain's `control` update."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["add_rule", "remove_rule", "restore_rule", "pause", "resume"]
    by: str = Field(description="Who makes the change.")
    rule: Rule | None = None  # add_rule
    name: str | None = None  # remove_rule, restore_rule (a default rule removed)
    state: CfAState | None = None  # pause / resume scope
    task_type: str | None = Field(None, max_length=TASK_TYPE_CHARS)

    @field_validator("by")
    @classmethod
    def _by(cls, v: str) -> str:
        return check_responder(v)


def apply_change(control: Control, change: ControlChange, now: datetime | None) -> Control:
    """The Control after the change (a new object), or ValueError in one line. Pure: the
    brain's validator runs it to refuse, its handler to apply. Retries are idempotent:
    the same rule added again, a pause already in place, a rule already gone."""
    out = control.model_copy(deep=True)
    if change.op == "add_rule":
        if change.rule is None:
            raise ValueError("add_rule needs a rule")
        rule = Rule.model_validate(change.rule.model_dump())
        if rule.regex and len(rule.regex) > MAX_REGEX_CHARS:
            raise ValueError(f"a regex is at most {MAX_REGEX_CHARS} characters")
        rule = rule.model_copy(update={"author": rule.author or change.by, "created": rule.created or now})
        if is_default(rule.name):
            raise ValueError(f"{rule.name!r} is the name of one of Vicar's default rules; choose another")
        same = next((r for r in out.rules if r.name == rule.name), None)
        if same is not None:
            if same.same_as(rule):
                return out
            raise ValueError(f"rule {rule.name!r} exists with other conditions; remove it first")
        if len(out.rules) >= MAX_RULES:
            raise ValueError(f"at most {MAX_RULES} rules per principal; remove one first")
        out.rules.append(rule)
    elif change.op in ("remove_rule", "restore_rule") and change.name and is_default(change.name):
        # A default rule is removed (or brought back) by name, like the person's own.
        removed = [n for n in out.removed_defaults if n != change.name]
        out.removed_defaults = removed + ([change.name] if change.op == "remove_rule" else [])
    elif change.op == "restore_rule":
        raise ValueError(f"{change.name!r} is not one of Vicar's default rules (`vicar rules list` shows them)")
    elif change.op == "remove_rule":
        if not change.name:
            raise ValueError("remove_rule needs the rule's name")
        out.rules = [r for r in out.rules if r.name != change.name]
        if len(out.rules) == len(control.rules) and not any(r.name == change.name for r in control.rules):
            return out  # already gone (a retry, or a typo the caller reports from the list)
    elif change.op == "pause":
        pause = Pause(by=change.by, at=now, state=change.state, task_type=change.task_type)
        if any(p.state is pause.state and p.task_type == pause.task_type for p in out.pauses):
            return out
        if len(out.pauses) >= MAX_PAUSES:
            raise ValueError(f"at most {MAX_PAUSES} pauses per principal; resume one first")
        out.pauses.append(pause)
    else:  # resume: the pause of exactly this scope, or every pause when no scope is given
        task_type = change.task_type.strip().lower() if change.task_type else None
        if change.state is None and task_type is None:
            out.pauses = []
        else:
            out.pauses = [p for p in out.pauses if not (p.state is change.state and p.task_type == task_type)]
    size = len(out.model_dump_json())
    if size > MAX_CONTROL_BYTES:
        raise ValueError(f"the principal's rules would take {size} bytes, over the bound of {MAX_CONTROL_BYTES}")
    if out != control:
        out.version = control.version + 1
    return out


class Verdict(BaseModel):
    """What the human's control says of one gate: nothing (None), escalate (with the
    reason), or an answer by a rule."""

    escalate: bool = False
    reason: str = ""  # "paused by X at T" or "rule NAME (ask, by AUTHOR)"
    guard: str = ""  # "paused" or "rule": shown where escalation reasons are shown
    rule: Rule | None = None  # the rule that decided (None for a pause)
