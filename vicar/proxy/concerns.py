"""The one concern vocabulary: the design's eight categories, matched on word
boundaries, and the cleaning that keeps a reviewer's tags and status lines from
counting as concerns. Pure; used by the proxy's bookkeeping and the replay's metric.

Substring cues counted "test" in "latest" and "order" in "border", and a trailer such as
"Reviewed-by: Guenter Roeck <linux@roeck-us.net>" as five concerns, inflating the words metric; here a
cue is a whole word or phrase, and tags, addresses and status lines go before matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# "before", "after" and "first" are left out: nearly every reply says them.
# Each cue is a regex fragment matched between word boundaries on the lower-cased text;
# a trailing \w* marks a stem ("vulnerab" -> "vulnerable", "vulnerability").
CATEGORIES: dict[str, tuple[str, ...]] = {
    "error_handling": (
        r"errors?",
        r"error handling",
        r"error paths?",
        r"exceptions?",
        r"fail(?:s|ed|ing|ure|ures)?",
        r"failure modes?",
        r"crash\w*",
        r"errno",
        r"return values?",
    ),
    "rollback": (r"rollback", r"roll back", r"revert\w*", r"undo", r"back out", r"downgrade"),
    "security": (
        r"security",
        r"secure",
        r"secrets?",
        r"credentials?",
        r"authentication",
        r"authorization",
        r"permissions?",
        r"privileges?",
        r"injection",
        r"vulnerab\w*",
        r"leak\w*",
        r"overflows?",
        r"sanitiz\w*",
    ),
    "idempotency": (r"idempoten\w*", r"retry", r"retries", r"duplicat\w*", r"twice", r"re-?run", r"exactly once"),
    "testing": (r"tests?", r"tested", r"testing", r"untested", r"coverage", r"regressions?", r"ci", r"selftests?"),
    "documentation": (
        r"document\w*",
        r"docs",
        r"readme",
        r"comments?",
        r"changelog",
        r"commit (?:message|log|description)s?",
        r"describe\w*",
    ),
    "sequencing": (
        r"order",
        r"ordering",
        r"reorder\w*",
        r"sequence",
        r"depends on",
        r"races?",
        r"racy",
        r"split",
    ),
    "external_dependencies": (
        r"dependency",
        r"dependencies",
        r"third-party",
        r"upstream",
        r"librar(?:y|ies)",
        r"vendor\w*",
        r"api",
        r"firmware",
    ),
}
_CATEGORY_RES = {name: re.compile(r"\b(?:" + "|".join(cues) + r")\b") for name, cues in CATEGORIES.items()}
# Kernel error codes (-EINVAL, -ENODATA) are error handling, matched before lower-casing.
_ERROR_CODE = re.compile(r"-E[A-Z]{3,}\b")

# Lines that are bookkeeping, not words about the work: trailers, status lines and
# sign-offs. Checked on each stripped line of a reply (the data: dev/*.jsonl.gz).
_TRAILER = re.compile(
    r"^(?:[A-Za-z]+(?:-[A-Za-z]+)*-by|Cc|To|From|Link|Closes|Fixes|Message-I[dD]|Subject|Date)\s*:", re.I
)
_STATUS = re.compile(
    r"^(?:(?:(?:series|patch(?:es)?|both|all|the series)\s+)?applied\b.*"  # "Applied.", "Series applied to hwmon-next."
    r"|thanks?(?: you)?[,.!]*(?:\s+applied\b.*)?"  # "Thanks,", "Thanks, applied."
    r"|will (?:merge|cook|keep|discard|hold|queue|be merged)\b.*"  # Junio's "Will merge to 'next'."
    r"|(?:soon|ready|can wait|should be ok|is this ready|in) (?:in|for) ['\"]?(?:next|master|maint)\b.*"
    r"|for my reference:?|for hwmon:?|\[?\s*\.\.\.\s*\]?|<?/?form letter>?"
    r")$",
    re.I,
)
_CLOSING = re.compile(r"^(?:thanks?(?: you)?|(?:best |kind )?regards|cheers)[,.!]*$", re.I)
_NAME_LINE = re.compile(r"^[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}$")
_EMAIL = re.compile(r"<?[\w.+-]+@[\w-]+(?:\.[\w-]+)+>?")
_URL = re.compile(r"https?://\S+")
_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
STOPWORDS = frozenset(
    "this that with from have will would should could there their about which when what into been were "
    "they them then than also only more most some such very just like does here your please thanks patch "
    "series merge next master while need needs since because these those other applied make made "
    "where same still even much back sure think know want using used driver".split()
)


def _signature(line: str, names: Iterable[str]) -> bool:
    """A line that is only a name ("Guenter", "Junio C Hamano")."""
    low = line.lower().strip(" ,.-")
    return bool(low) and any(low == n.lower() or low == n.lower().split()[0] for n in names)


def strip_tags(text: str, names: Iterable[str] = ()) -> str:
    """The reply without trailer tags, status lines, quoted lines, sign-offs (`names`:
    the reviewer's name), e-mail addresses and links."""
    names = tuple(names)
    kept = []
    closing = False  # the line before was "Thanks," or "Regards,": a name may follow
    for line in text.splitlines():
        s = line.strip()
        signed = closing and bool(_NAME_LINE.match(s))
        closing = bool(_CLOSING.match(s)) or (closing and not s)
        if s.startswith(">") or _TRAILER.match(s) or _STATUS.match(s) or _signature(s, names) or signed:
            continue
        kept.append(_URL.sub(" ", _EMAIL.sub(" ", line)))
    return "\n".join(kept).strip()


def categories_in(text: str) -> set[str]:
    """The design categories the (already stripped) text raises, on word boundaries."""
    low = text.lower()
    found = {name for name, rx in _CATEGORY_RES.items() if rx.search(low)}
    if _ERROR_CODE.search(text):
        found.add("error_handling")
    return found


def content_words(text: str) -> set[str]:
    """The (already stripped) text's content words: the candidates for a reviewer's themes."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def concerns_in(text: str, themes: Iterable[str] = (), names: Iterable[str] = ()) -> set[str]:
    """Every concern a reply raises: its design categories and the reviewer's `themes`
    it names (as "theme:<word>"), after stripping tags and status lines."""
    clean = strip_tags(text, names)
    words = content_words(clean)
    return categories_in(clean) | {f"theme:{t}" for t in themes if t in words}


# What a sentence says of the verdict itself: an approval's words ("Fine, ship it.") read
# under a reject, or a refusal's ("No: it drops the table.") under an approve, turn the
# proxy's shown answer against itself, and mislead who reads both. Checked at a sentence's start (and a
# few phrases anywhere); "Fine, but ..." is a turn-back that opens kindly, not a verdict.
_APPROVING = re.compile(
    r"^\W*(?:fine|lgtm|looks (?:good|fine|ok|okay|great)|ship it|approved?|acked|ack|ok(?:ay)?|good to go"
    r"|sounds good|works for me|great|nice)\b"
    r"|\b(?:ship it|lgtm|looks good to me|good to go|fine by me)\b|\bfine\W*$",
    re.I,
)
_REFUSING = re.compile(
    r"^\W*(?:no|nak|nack|nope|rejected?|not (?:ok|okay|yet|like this|acceptable)|don'?t|do not|please don'?t"
    r"|this (?:breaks|is wrong))\b|\b(?:nak|not acceptable|cannot accept|can'?t accept|won'?t merge)\b",
    re.I,
)
_BUT = re.compile(r"\b(?:but|however|except|though|although|unless)\b", re.I)
# An artifact that says it lacks what a concern is about ("No rollback step.", "untested").
_LACKS = r"\b(?:no|without|lacks?|lacking|missing|never)\b(?:\s+\w+){0,2}?\s+(?:%s)\b"
_LACKS_RES = {name: re.compile(_LACKS % "|".join(cues), re.I) for name, cues in CATEGORIES.items()}
_UNTESTED = re.compile(r"\buntested\b", re.I)
_PIECES = re.compile(r"(?<=[.?!])[ \t]+|\n+")
TURNED_BACK_ACTIONS = ("correct", "reject")


def stance(sentence: str) -> str:
    """'approve' for an approval's words, 'turn_back' for a refusal's, '' for neither."""
    if _REFUSING.search(sentence):
        return "turn_back"
    if _APPROVING.search(sentence) and not _BUT.search(sentence):
        return "approve"
    return ""


def lacking(artifact: str) -> set[str]:
    """The concern categories the artifact says it lacks."""
    found = {name for name, rx in _LACKS_RES.items() if rx.search(artifact)}
    if _UNTESTED.search(artifact):
        found.add("testing")
    return found


def fits(action: str, sentence: str, lacks: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Whether the sentence may stand as the words of `action`: an approve's words neither
    refuse, ask, nor vouch for what the artifact says it lacks; a correction's or a
    reject's do not approve."""
    said = stance(sentence)
    if action == "approve":
        return said != "turn_back" and not sentence.rstrip().endswith("?") and not (categories_in(sentence) & lacks)
    if action in TURNED_BACK_ACTIONS:
        return said != "approve"
    return True


def fitting_words(action: str, text: str, artifact: str = "") -> str:
    """`text` without the sentences that turn against `action` (paragraphs kept)."""
    lacks = lacking(artifact[:20_000]) if action == "approve" and artifact else set()
    paragraphs = []
    for para in re.split(r"\n\s*\n", text.strip()):
        kept = [s for s in (p.strip() for p in _PIECES.split(para)) if s and fits(action, s, lacks)]
        if kept:
            paragraphs.append(" ".join(kept))
    return "\n\n".join(paragraphs)
