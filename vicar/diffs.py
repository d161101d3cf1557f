"""Unified diffs: telling one (the one detector), its changed lines for a one-line excerpt
(a person must see what they approve: a `docs` diff that also drops a table must show the drop in a listing, not the
headers that fill it), and its lines classed for display (the inbox colours them)."""

from __future__ import annotations

import re

HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
# Enough lines to recognise a diff without scanning a huge artifact twice.
HEAD_LINES = 200


def looks_like_diff(text: str) -> bool:
    head = text.lstrip().splitlines()[:HEAD_LINES]
    return any(HUNK.match(line) for line in head) and any(
        line.startswith(("diff --git ", "--- ", "+++ ")) for line in head
    )


def _path(line: str) -> str:
    name = line[4:].split("\t", 1)[0].strip()
    # git's a/ and b/ prefixes say nothing to a reader.
    return name[2:] if name.startswith(("a/", "b/")) else name


def changed_lines(text: str, budget: int) -> str | None:
    """`path: -old +new ...` for the first changed lines of a unified diff, about `budget`
    characters; None for text that is not one. Hunk line counts decide what is a change,
    so a removed line that reads `-- x` is not taken for a header."""
    if not looks_like_diff(text):
        return None
    parts: list[str] = []
    size = 0
    path, named = "", ""
    old = new = 0
    for line in text.splitlines():
        if old > 0 or new > 0:
            if line.startswith("\\"):  # "\ No newline at end of file"
                continue
            mark = line[:1]
            if mark == "-":
                old -= 1
            elif mark == "+":
                new -= 1
            else:
                old, new = old - 1, new - 1
                continue
            change = " ".join(line[1:].split())
            if not change:
                continue
            if path != named:
                parts.append(f"{path}:")
                named = path
            parts.append(f"{mark}{change}")
            size += len(change) + 2
            if size >= budget:
                break
            continue
        if line.startswith("--- "):  # outside a hunk: a file's header
            path = _path(line)
        elif line.startswith("+++ "):
            target = _path(line)
            path = path if target == "/dev/null" else target
        elif line.startswith("diff --git "):
            path = ""
        elif m := HUNK.match(line):
            old = int(m.group("old") or 1)
            new = int(m.group("new") or 1)
    if not parts:
        return None
    return " ".join(parts)


def diff_lines(text: str) -> list[tuple[str, str]]:
    """(class, line) per line of a unified diff: head, hunk, add, del or ctx."""
    out = []
    for line in text.splitlines():
        if line.startswith(("diff --git ", "index ", "--- ", "+++ ")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out
