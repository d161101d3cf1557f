"""An artifact's lineage: the stable id of its thread across revisions.

The signal of a reviewer's next verdict is mostly their last verdict on the same thread
(a topic branch, a patch and its rerolls) and whether the artifact changed since. A
request may carry its lineage and revision; otherwise both are derived from its title:
bracketed tags (`[PATCH v3 2/5]`, `[RFC]`), reply and forward markers (`Re:`, `Fwd:`)
are stripped and whitespace is folded, so `[PATCH v3 2/5] hwmon: (lm75) Add X` and
`Re: [PATCH v4 2/5] hwmon: (lm75)  Add X` share one lineage.
"""

from __future__ import annotations

import functools
import hashlib
import re

from pydantic import BaseModel

from vicar.models import GateRequest

# Linear patterns only (no nested quantifiers): titles are bounded but untrusted.
# A tag may close with "}" by mistake ("[PATCH} hwmon: ..." is in the hwmon archive).
_LEADING = re.compile(r"^\s*(?:\[[^\]}\n]{0,200}[\]}]|(?:re|fwd?|aw|sv)\s*:)\s*", re.IGNORECASE)
_VERSION = re.compile(r"\b[vV](\d{1,4})\b")
_POSITION = re.compile(r"\b(\d{1,4})\s*/\s*(\d{1,4})\b")
_SPACE = re.compile(r"\s+")
_MAX_PREFIXES = 20  # "Re: Re: [PATCH] [RFC] ..." never loops long


class Lineage(BaseModel):
    lineage: str  # "" when the request has neither a lineage nor a title
    revision: str = ""  # "v3"; "" when unknown (the first version, or not stated)
    position: int | None = None  # 2 in "2/5"
    series_size: int | None = None  # 5 in "2/5"; 0/5 is a cover letter
    artifact_hash: str = ""  # what the artifact said, so "changed since" can be told


@functools.lru_cache(maxsize=256)
def derive(title: str) -> Lineage:
    """The lineage, revision and series position stated by a title. Cached: a gate
    asks for its lineage several times; callers copy it, never change it."""
    rest, tags = title, []
    for _ in range(_MAX_PREFIXES):
        m = _LEADING.match(rest)
        if not m:
            break
        tags.append(m.group(0))
        rest = rest[m.end() :]
    tag_text = " ".join(tags)
    version = _VERSION.search(tag_text)
    position = _POSITION.search(tag_text)
    return Lineage(
        lineage=_SPACE.sub(" ", rest).strip(),
        revision=f"v{int(version.group(1))}" if version else "",
        position=int(position.group(1)) if position else None,
        series_size=int(position.group(2)) if position else None,
    )


@functools.lru_cache(maxsize=32)
def artifact_hash(text: str) -> str:
    """Whitespace-insensitive. Cached: a gate asks for its artifact's hash several times
    (retrieval, features, the stored chunk) and an artifact may be large. str.split()
    splits on exactly the characters `\\s` matches, 4x faster."""
    normalized = " ".join(text.split())
    return hashlib.blake2b(normalized.encode(), digest_size=8).hexdigest() if normalized else ""


def lineage_of(request: GateRequest, artifact: str | None = None) -> Lineage:
    """The request's own lineage and revision where given, the title's otherwise."""
    derived = derive(request.title) if request.title else Lineage(lineage="")
    return derived.model_copy(
        update={
            "lineage": request.lineage or derived.lineage,
            "revision": request.revision if request.revision is not None else derived.revision,
            "artifact_hash": artifact_hash(request.artifact_text if artifact is None else artifact),
        }
    )
