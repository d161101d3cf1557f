"""Reading the model's replies. Only model output is parsed here, never artifact text,
and every parse fails toward caution: no confidence, no action, no percepts."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import NamedTuple

from vicar.models import Action

# Where the confidence line may sit: among the reply's last few non-empty lines, so a
# "CONFIDENCE: 1.0" quoted earlier in the prose (or copied from an artifact) is not it.
CONFIDENCE_TAIL_LINES = 3
_DECOR = r"[\s*_`>#\-]*"
_CONFIDENCE_LABEL = re.compile(rf"^{_DECOR}confidence[\s*_`]*[:=]", re.IGNORECASE)
_CONFIDENCE_LINE = re.compile(
    rf"^{_DECOR}confidence[\s*_`]*[:=][\s*_`]*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    # Not `[\s*_`]*\.?[\s*_`]*$`: two stars over the same characters backtrack
    # quadratically on a long run of them.
    rf"[\s*_`]*(?:\.[\s*_`]*)?$",
    re.IGNORECASE,
)
_ACTION_PREFIX = re.compile(r"^(?:action|answer|label|classification)\s*[:=]\s*", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"```[a-zA-Z]*\s*")
MAX_PERCEPTS = 5
MAX_PERCEPT_CHARS = 200
MAX_DESCRIPTION_CHARS = 500
# A citation of pre-review items: [1], [2, 3]; two digits at most (k is small).
_CITATION = re.compile(r"\[(\d{1,2}(?:\s*,\s*\d{1,2})*)\]")
_CITATION_GAP = re.compile(r"[ \t]*\[\d{1,2}(?:\s*,\s*\d{1,2})*\]")


class Reply(NamedTuple):
    prose: str
    confidence: float
    found: bool  # a well-formed CONFIDENCE line was there


def parse_reply(text: str) -> Reply:
    """A pass's reply split into prose and confidence. The confidence is the last
    `CONFIDENCE: <number>` line among the final non-empty lines, clamped to [0, 1];
    missing or garbled ("CONFIDENCE: high", "85%", NaN) gives 0.0. The prose is the
    reply without that line (a garbled one is dropped too)."""
    lines = text.splitlines()
    nonempty = [i for i, line in enumerate(lines) if line.strip()]
    for i in reversed(nonempty[-CONFIDENCE_TAIL_LINES:]):
        if not _CONFIDENCE_LABEL.match(lines[i]):
            continue
        prose = "\n".join(lines[:i] + lines[i + 1 :]).strip()
        m = _CONFIDENCE_LINE.match(lines[i])
        if not m:
            return Reply(prose, 0.0, False)
        value = float(m.group(1))
        if not math.isfinite(value):
            return Reply(prose, 0.0, False)
        return Reply(prose, min(max(value, 0.0), 1.0), True)
    return Reply(text.strip(), 0.0, False)


def parse_confidence(text: str) -> tuple[str, float]:
    """(prose, confidence) of a pass's reply; see parse_reply."""
    reply = parse_reply(text)
    return reply.prose, reply.confidence


def parse_action(text: str, valid: Sequence[Action]) -> Action | None:
    """The one action the classifier answered, or None. Strict on purpose: the reply's
    last non-empty line must be exactly one valid action name (optionally labelled,
    quoted or emphasised); hedges and lists give None, never a default approval."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    word = _ACTION_PREFIX.sub("", lines[-1]).strip().strip("*_`'\".:;!, ").lower()
    for action in valid:
        if word == action.value:
            return action
    return None


def parse_surprise(text: str) -> tuple[str, list[str]]:
    """(description, percepts) from the surprise call, asked to answer with JSON
    {"description": str, "percepts": [str, ...]}. When the JSON is unusable the
    description is the reply's first line and the percepts are empty."""
    # The fences by hand: a regex `\s*```$` is retried at every start of a long
    # whitespace run (quadratic).
    raw = text.strip()
    opening = _FENCE_OPEN.match(raw)
    raw = raw[opening.end() :] if opening else raw
    raw = raw[:-3].rstrip() if raw.endswith("```") else raw
    start, end = raw.find("{"), raw.rfind("}")
    data = None
    if 0 <= start < end:
        try:
            data = json.loads(raw[start : end + 1])
        except ValueError:
            data = None
    if isinstance(data, dict):
        desc = data.get("description")
        description = " ".join(desc.split())[:MAX_DESCRIPTION_CHARS] if isinstance(desc, str) else ""
        raw_percepts = data.get("percepts")
        percepts: list[str] = []
        if isinstance(raw_percepts, list):
            for p in raw_percepts:
                if len(percepts) == MAX_PERCEPTS:  # also keeps the `in` below short
                    break
                if isinstance(p, str) and p.strip() and p.strip() not in percepts:
                    percepts.append(" ".join(p.split())[:MAX_PERCEPT_CHARS])
        if description:
            return description, percepts[:MAX_PERCEPTS]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.startswith(("{", "```")):  # broken JSON is no description
        first = ""
    return first[:MAX_DESCRIPTION_CHARS], []


def citations_in(text: str) -> list[int]:
    """The item numbers a piece of the reply cites, in order, each once."""
    found = [int(x) for m in _CITATION.finditer(text) for x in m.group(1).split(",")]
    return list(dict.fromkeys(found))


def strip_citations(text: str) -> str:
    """The reply without its citation markers ("the step [1]." -> "the step.")."""
    return _CITATION_GAP.sub("", text)
