"""What the selector reads of a gate's artifact: the files and paths touched, tests,
new or deleted files, the size and shape of the change, its revision, the kind of change
(bench/score/selector.py, which learns from these). Pure: regexes over the text, bounded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ACTIONS = ("approve", "correct", "reject", "hold")
WORDS_ACTIONS = frozenset({"correct", "reject"})  # the person turns the work back
NAN = float("nan")

_DIFF_FILE = re.compile(r"^diff --git a/(\S{1,300}) b/(\S{1,300})", re.MULTILINE)
_PLUS = re.compile(r"^\+(?!\+\+ )", re.MULTILINE)
_MINUS = re.compile(r"^-(?!-- )", re.MULTILINE)
_HUNK = re.compile(r"^@@ ", re.MULTILINE)
_TAG = re.compile(r"^(Reviewed|Acked|Tested)-by:", re.MULTILINE | re.IGNORECASE)
_SOB = re.compile(r"^Signed-off-by:", re.MULTILINE)
_FIXES = re.compile(r"^Fixes:", re.MULTILINE)
_STABLE = re.compile(r"stable@(?:vger\.)?kernel\.org", re.IGNORECASE)
_TOPIC = re.compile(r"^Topic: \S{1,200} \((\d{1,5}) commits?", re.MULTILINE)
_SUBJECT = re.compile(r"^ - (.{1,300})$", re.MULTILINE)
_VERSION = re.compile(r"\[[^\]]{0,80}\b[vV](\d{1,3})\b")
_POSITION = re.compile(r"\[[^\]]{0,80}\b(\d{1,3})/(\d{1,3})\]")
_WORD = re.compile(r"[a-z][a-z0-9_]{1,30}")
# Kinds of change, by a word of the title (lowercased); each a 0/1 feature.
KINDS: dict[str, tuple[str, ...]] = {
    "fix": ("fix", "fixes", "bug", "correct", "regression"),
    "add": ("add", "adds", "support", "introduce", "new", "implement", "enable"),
    "remove": ("remove", "drop", "delete", "kill", "retire", "deprecate"),
    "convert": ("convert", "migrate", "switch", "use", "replace", "move"),
    "cleanup": ("cleanup", "clean", "tidy", "simplify", "refactor", "rename", "typo", "style", "whitespace"),
    "docs": ("doc", "docs", "document", "documentation", "comment", "comments"),
    "test": ("test", "tests", "testing", "selftest", "selftests"),
    "revert": ("revert",),
    "rfc": ("rfc",),
}


@dataclass(frozen=True)
class Gate:
    """What the selector reads of one gate: the request and the predictor's proposal."""

    task_type: str
    title: str = ""
    text: str = ""
    agent: str | None = None  # the upstream agent (the artifact's author)
    lineage: str = ""  # the artifact's thread (vicar.proxy.lineage); "" when unknown
    action: str | None = None  # the proposed action
    score: float | None = None  # the predictor's confidence in it
    probs: Mapping[str, float] | None = None  # the predictor's class probabilities
    # artifact_features(self), when the caller computed them already (a replay scores
    # the same gate many times); None: computed here.
    artifact: Mapping[str, float] | None = None
    # The artifact's embedding (unit length; the consult's posterior query has it): the
    # "similar work" features read the person's answers on the nearest past artifacts.
    vector: np.ndarray | None = None


def touched_files(text: str) -> list[str]:
    return list(dict.fromkeys(b for _, b in _DIFF_FILE.findall(text)))


def artifact_features(gate: Gate) -> dict[str, float]:
    """What the artifact says of itself: no history needed."""
    text, title = gate.text, gate.title.lower()
    files = touched_files(text)
    words = set(_WORD.findall(title))
    position = _POSITION.search(gate.title)
    version = _VERSION.search(gate.title)
    topic = _TOPIC.search(text)
    f = {
        "chars": float(len(text)),
        "title_words": float(len(title.split())),
        "files": float(len(files)),
        "new_files": float(text.count("\nnew file mode")),
        "deleted_files": float(text.count("\ndeleted file mode")),
        "renamed": float(text.count("\nrename from")),
        "plus": float(len(_PLUS.findall(text))),
        "minus": float(len(_MINUS.findall(text))),
        "hunks": float(len(_HUNK.findall(text))),
        "tests": float(sum("test" in p.lower() for p in files)),
        "docs": float(sum(p.startswith("Documentation/") or p.endswith((".rst", ".txt", ".md")) for p in files)),
        "bindings": float(sum("devicetree/bindings" in p or p.endswith(".yaml") for p in files)),
        "build": float(sum(p.rsplit("/", 1)[-1] in ("Kconfig", "Makefile") for p in files)),
        "headers": float(sum(p.endswith(".h") for p in files)),
        "maintainers": float(any(p == "MAINTAINERS" for p in files)),
        "top_dirs": float(len({p.split("/", 1)[0] for p in files})),
        "tags": float(len(_TAG.findall(text))),
        "signoffs": float(len(_SOB.findall(text))),
        "fixes_tag": float(bool(_FIXES.search(text))),
        "stable": float(bool(_STABLE.search(text))),
        "cover": float(position is not None and position.group(1) == "0") if files or position else NAN,
        "commits": float(topic.group(1)) if topic else NAN,
        "subjects": float(len(_SUBJECT.findall(text))) if topic else NAN,
        "revision": float(version.group(1)) if version else 1.0,
        "position": float(position.group(1)) if position else NAN,
        "series_size": float(position.group(2)) if position else NAN,
    }
    # git topics: the commit subjects say what kind of change it is as much as the title.
    subject_words = set(_WORD.findall(" ".join(_SUBJECT.findall(text)).lower())) if topic else set()
    for kind, cues in KINDS.items():
        f[f"kind_{kind}"] = float(bool(words & set(cues)) or bool(subject_words & set(cues)))
    return f


def similar_keys(files: Sequence[str]) -> list[str]:
    """The touched files' directories and the files themselves: "similar work" keys."""
    out = []
    for p in files:
        out.append(p)
        if "/" in p:
            out.append(p.rsplit("/", 1)[0] + "/")
    return list(dict.fromkeys(out))
