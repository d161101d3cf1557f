"""Health monitor: the human's approval rate per (state, task type) across sessions.

Observational only, like the EMA: nothing here changes what the proxy decides. A
falling approval rate says the agents' work got worse or the human's bar moved; either
way an operator should look.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import fmean

from pydantic import BaseModel

from vicar.models import Action, AnsweredBy, OutcomeRecord, RequestKind

SESSIONS = 10  # the trend looks at this many latest sessions
MIN_SESSIONS = 4
DROP = 0.3  # a fall in approval rate this large between the window's halves is flagged


class ContextHealth(BaseModel):
    state: str
    task_type: str
    human_answers: int
    sessions: list[str]  # oldest first, the latest SESSIONS
    approval_rates: list[float]  # per session, same order
    earlier: float | None = None  # mean rate over the window's first half
    later: float | None = None
    flagged: bool = False
    ema_approval_rate: float | None = None
    responders: dict[str, int] = {}  # who answered, most answers first ("?": not recorded)


def session_of(record: OutcomeRecord) -> str:
    if record.request.session_id:
        return record.request.session_id
    if record.at is not None:
        return record.at.date().isoformat()
    return f"N{record.n // 50 * 50}"


def context_health(records: list[OutcomeRecord], ema: dict[tuple[str, str], float | None] | None = None
                   ) -> list[ContextHealth]:
    """Records in log order; proxy answers are left out (they are not the human)."""
    per: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(dict)
    who: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in records:
        if r.answered_by is not AnsweredBy.human or r.request.kind is not RequestKind.gate:
            continue
        key = (r.request.state.value, r.request.task_type)
        per[key].setdefault(session_of(r), []).append(r.action is Action.approve)
        who[key][r.responder or "?"] += 1
    out = []
    for (state, task_type), sessions in sorted(per.items()):
        names = list(sessions)[-SESSIONS:]  # dicts keep first-seen order: log order
        rates = [fmean(sessions[s]) for s in names]
        h = ContextHealth(state=state, task_type=task_type,
                          human_answers=sum(len(v) for v in sessions.values()),
                          sessions=names, approval_rates=rates,
                          ema_approval_rate=(ema or {}).get((state, task_type)),
                          responders=dict(who[(state, task_type)].most_common()))
        if len(rates) >= MIN_SESSIONS:
            half = len(rates) // 2
            h.earlier, h.later = fmean(rates[:half]), fmean(rates[-half:])
            h.flagged = h.earlier - h.later >= DROP
        out.append(h)
    return out
