"""Untrusted text on a terminal: shown as text, never as markup or control sequences.

Questions, guesses, dialog, ids and error messages come from requests, answers and
memory. Rich would read `[/bold]` as markup (and crash on an unbalanced tag) and the
terminal would obey ESC sequences, OSC 8 links, \\r and backspaces. Every CLI output of
such text is a `text(...)` (rich never parses a Text as markup) or a `clean(...)` string
printed with markup off.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 except \t and \n, DEL, C1, the bidi overrides that reorder what is shown, and lone
# surrogates (undecodable bytes in argv), which no terminal encoding can write.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(m: re.Match) -> str:
    return m.group().encode("unicode_escape").decode("ascii")  # ESC -> the four characters \x1b


def clean(value: object, one_line: bool = False) -> str:
    """`value` as text with every control character made visible (\\x1b, \\r, \\u202e);
    with `one_line`, newlines and tabs too."""
    return (_CONTROL_OR_NEWLINE if one_line else _CONTROL).sub(_visible, str(value))


def text(value: object, style: str = "", one_line: bool = False) -> Text:
    """A cleaned Text: for table cells, titles and lines that mix styles with untrusted text."""
    return Text(clean(value, one_line), style=style)
