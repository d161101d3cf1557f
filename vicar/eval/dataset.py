"""Gate-replay events (shared/datasets/gate-replay/README.md) and their loading."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from vicar.errors import VicarError
from vicar.models import Action, CfAState, GateRequest
from vicar.models.limits import NAME_CHARS, TITLE_CHARS

_AUTHOR = re.compile(r"^(?:From|Signed-off-by):[ \t]*([^<\n]{1,100})", re.MULTILINE)


class GateEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reviewer: str
    seq: int
    gate_id: str
    state: CfAState
    task_type: str
    artifact_title: str = ""
    artifact_text: str = ""
    question: str
    action: Action
    response: str = ""
    source: str = ""
    # The permission study's fields (shared/datasets/permissions/README.md); absent in the
    # reviewers' files.
    team: str | None = None  # events sharing it are one team's, replayed in file order
    split: str | None = None  # the study's train/test split
    ask_first: bool = False  # "… but ask me first": the person wants to be asked
    app: str | None = None
    data_type: str | None = None
    query_id: int | None = None

    def request(self, principal: str) -> GateRequest:
        return GateRequest(
            principal=principal,
            gate_id=_gate_id(self.gate_id),
            state=self.state,
            task_type=self.task_type or "general",
            question=self.question,
            artifact_text=self.artifact_text,
            title=self.artifact_title,
            # A data type shared with an app is the kind of action, as a hook's tool and
            # command are (the team prior's parts: the app, and what it gets).
            lineage=f"{self.app}:{self.data_type}"[:TITLE_CHARS] if self.app and self.data_type else None,
            upstream_agent=self.author(),
        )

    def author(self) -> str | None:
        """Who submitted the artifact: the upstream agent of a replayed gate. git: the
        topic's initials (`ab/` of `ab/topic`); kernel: the patch's From: or first
        Signed-off-by: name."""
        if self.source == "git-whats-cooking":
            prefix, slash, _ = self.artifact_title.partition("/")
            return prefix[:NAME_CHARS] if slash and prefix else None
        m = _AUTHOR.search(self.artifact_text)
        return (m.group(1).strip()[:NAME_CHARS] or None) if m else None


def principal_for(reviewer: str, seed: int = 0) -> str:
    """A valid principal name for a reviewer's display name. A replay seed other than 0
    goes into the name: the activation noise and the audit draws are keyed by the
    principal, so it gives the same gates other draws."""
    slug = re.sub(r"[^A-Za-z0-9._@-]+", "-", reviewer).strip("-.").lower()
    suffix = f"-seed{seed}" if seed else ""
    return (slug or "reviewer")[: 64 - len(suffix)] + suffix


def _gate_id(raw: str) -> str:
    gid = re.sub(r"[^A-Za-z0-9._:@/-]+", "-", raw).lstrip("-._:@/") or "gate"
    return gid[:200]


def load_events(paths: list[Path]) -> dict[str, list[GateEvent]]:
    """Events per reviewer, in `seq` order. Bad lines are reported with file and line."""
    by_reviewer: dict[str, list[GateEvent]] = defaultdict(list)
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt", encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        event = GateEvent.model_validate(json.loads(line))
                    except (json.JSONDecodeError, ValidationError) as exc:
                        first = str(exc).splitlines()
                        raise VicarError(f"{path}:{lineno}: not a gate event ({'; '.join(first[:3])})") from None
                    by_reviewer[event.reviewer].append(event)
        except OSError as exc:
            raise VicarError(f"cannot read {path}: {exc.strerror or exc}") from None
    for events in by_reviewer.values():
        events.sort(key=lambda e: e.seq)
    return dict(by_reviewer)
