"""record_outcome: store the gate as a memory chunk, log it, update the bookkeeping and
write the three persisted artifacts. Every step is idempotent per gate workflow id.

Artifacts live beside the principal's memory:
- proxy-confidence.json: the ConfidenceModel, rewritten atomically (temp file + rename);
- proxy-interactions.jsonl: one line per outcome, appended; lines missing after a crash
  are appended on the next write, never twice (the file's last line says where it ends);
- proxy-patterns.md: AGENT:/HUMAN: transcript of every gate, appended the same way.

The two logs are written from the store, never from the record in hand: under the
principal's side-file lock, each appends the store's outcomes after the last one it
holds, so concurrent gates and a retried activity racing its first attempt write each
outcome once. Only one process opens a memory (memory/owner.py), so a lock per
principal directory in this process is the principal's lock.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from pathlib import Path

from vicar.files import atomic_write as _atomic_write
from vicar.memory.chunk import MemoryChunk, chunk_id_for
from vicar.memory.principal import PrincipalMemory
from vicar.models import AnsweredBy, OutcomeRecord
from vicar.proxy import censors
from vicar.proxy import facts as fact_memory
from vicar.proxy.autonomy.ledger import Alone, Evidence
from vicar.proxy.bookkeeping import ConfidenceModel, ContextEntry, apply_outcome, context_key, load_entry
from vicar.proxy.lineage import lineage_of
from vicar.proxy.outcome_log import OutcomeEntry, context_entries, log_outcome
from vicar.settings import CalibrationParams, FactParams

CONFIDENCE_FILE = "proxy-confidence.json"
INTERACTIONS_FILE = "proxy-interactions.jsonl"
PATTERNS_FILE = "proxy-patterns.md"


def outcome_chunk(record: OutcomeRecord, artifact: str | None = None) -> MemoryChunk:
    """`artifact`: the whole artifact the gate saw (the request's text plus its paths'
    contents); None for an inline-only artifact. Hashed, so a later gate on the same
    lineage can tell whether it changed; unknown ("") when paths were not read."""
    req = record.request
    surprise = record.surprise
    if artifact is None and req.artifact_paths:
        artifact = ""
    lin = lineage_of(req, artifact)
    return MemoryChunk(
        id=chunk_id_for(req.principal, record.workflow_id),
        principal=req.principal,
        kind=req.kind.value,
        state=req.state.value,
        task_type=req.task_type,
        outcome=record.action.value,
        answered_by=record.answered_by.value,
        responder=record.responder,
        gate_id=req.gate_id,
        question=req.question,
        artifact_excerpt=req.artifact_text[:4000],
        actor_message=req.actor_message,
        upstream_agent=req.upstream_agent,
        prior_confidence=record.prior.confidence if record.prior else None,
        prior_prose=record.prior.prose if record.prior else "",
        posterior_confidence=record.posterior.confidence if record.posterior else None,
        posterior_prose=record.posterior.prose if record.posterior else "",
        surprise_description=surprise.description if surprise else "",
        salient_percepts=surprise.percepts if surprise else [],
        human_response=record.response_text,
        created_n=record.n,
        traces=[record.n],
        lineage=lin.lineage,
        revision=lin.revision,
        artifact_hash=lin.artifact_hash,
    )


def record_outcome(
    memory: PrincipalMemory,
    record: OutcomeRecord,
    *,
    artifacts: bool = True,
    artifact: str | None = None,
    params: CalibrationParams | None = None,
    facts: FactParams | None = None,
) -> str:
    """`artifact`: the whole artifact text (see outcome_chunk); None for the request's own.
    `params`: the regret window and the censors' learning and feedback; `facts`: how
    the human's answer moves their preferences (defaults: the shipped ones)."""
    if record.answered_by is AnsweredBy.rule:
        return _log_rule_answer(memory, record, artifacts)
    params = params or CalibrationParams()
    facts = facts or FactParams()
    moves = fact_memory.hindsight(memory, record, facts)
    chunk = outcome_chunk(record, artifact)
    memory.record(chunk)

    def update(stored: str | None) -> str:
        return apply_outcome(load_entry(stored), record).model_dump_json()

    censor_ids, censor_change = censors.feedback(record, params) or ((), None)
    logged = log_outcome(
        memory.store,
        _entry(
            record,
            update,
            evidence=autonomy_pair(record),
            alone=unaudited_alone(record),
            regrets=regretted(memory, record, chunk, params),
            censor_ids=censor_ids,
            censor_change=censor_change,
            facts=moves.changed,
            fact_audit=moves.audit,
            marks=answer_marks(record, chunk.id),
        ),
    )
    if logged.new:
        fact_memory.after_hindsight(memory, moves, record.n)
    censors.learn(memory, chunk, params)
    if artifacts:
        write_artifacts(memory)
    return chunk.id


def _log_rule_answer(memory: PrincipalMemory, record: OutcomeRecord, artifacts: bool) -> str:
    """A gate a rule of the human's answered (vicar/models/control.py): in the outcome
    log (the turn's release, the audit trail, the interactions file) and nowhere else. No
    chunk: it is neither the human's decision to learn from nor the proxy's to grade (a
    proxy chunk could become a regret pair), and no evidence, facts or censor feedback."""
    req = record.request
    log_outcome(
        memory.store,
        _entry(
            record,
            lambda stored: stored or ContextEntry(state=req.state.value, task_type=req.task_type).model_dump_json(),
        ),
    )
    if artifacts:
        write_artifacts(memory)
    return f"outcome/{record.workflow_id}"


def _entry(record: OutcomeRecord, update, **teaches) -> OutcomeEntry:
    """The outcome's log row and context update, with what else it teaches (`teaches`:
    OutcomeEntry's evidence, regrets, censor and fact fields)."""
    req = record.request
    return OutcomeEntry(
        workflow_id=record.workflow_id,
        state=req.state.value,
        task_type=req.task_type,
        answered_by=record.answered_by.value,
        action=record.action.value,
        at=record.at.isoformat() if record.at else None,
        record=record.model_dump_json(),
        context_key=context_key(req.state.value, req.task_type, req.kind),
        update=update,
        **teaches,
    )


RULED, ASK_FIRST = "ruled", "ask_first"  # answer_marks' marks (vicar.proxy.support reads them)


def answer_marks(record: OutcomeRecord, chunk_id: str) -> list[tuple[str, str]]:
    """What a human answer said beyond its action: a gate their rule or pause sent them
    (their decision), an answer given with "ask me first"."""
    if record.answered_by is not AnsweredBy.human:
        return []
    said = [RULED] if person_decided(record) else []
    said += [ASK_FIRST] if record.ask_first else []
    return [(chunk_id, m) for m in said]


def person_decided(record: OutcomeRecord) -> bool:
    """A gate the person's rule or pause sent to them: theirs to decide, whatever the proxy
    could have done."""
    cal = record.calibration
    return cal is not None and cal.guard in ("rule", "paused")


def autonomy_pair(record: OutcomeRecord) -> Evidence | None:
    """The autonomy rule's evidence from a gate: (kind, N, the posterior's score as the
    predictor gave it, whether its action was the human's, the upstream agent). Only a human's answer
    grades the proxy; a gate where the proxy could not run has no score to grade, and one
    the person's rule or pause sent to them is not graded."""
    post = record.posterior
    if record.answered_by is not AnsweredBy.human or post is None:
        return None
    cal = record.calibration
    # A gate the person's rule or pause sent to them was theirs to decide: the proxy
    # could never have answered it alone, so their answer is not the proxy's error (nor
    # its success). Chosen by the request, never by the label: the bets stay valid, over
    # the gates no rule or pause takes from the proxy.
    if (cal is not None and cal.guard == "proxy_error") or person_decided(record):
        return None
    return Evidence(
        record.request.kind.value,
        record.n,
        post.confidence,
        post.action is record.action,
        record.request.upstream_agent or None,
        # An audit's label was drawn with the rule's audit share: its weight is the inverse.
        audit_p=cal.audit_share if cal is not None and cal.guard == "audit" else None,
    )


def unaudited_alone(record: OutcomeRecord) -> Alone | None:
    """A gate the rule let the proxy answer alone, not drawn for an audit: a draw of the
    weighted bets with its label not taken (None for any other gate, and where nothing
    is audited: no audit could have taken its label)."""
    cal, post = record.calibration, record.posterior
    if record.answered_by is not AnsweredBy.proxy or cal is None or post is None or cal.guard != "passthrough":
        return None
    if not cal.audit_share:
        return None
    return Alone(record.request.kind.value, post.confidence, cal.audit_share)


def regretted(
    memory: PrincipalMemory, record: OutcomeRecord, chunk: MemoryChunk, params: CalibrationParams
) -> list[MemoryChunk]:
    """Regret (docs/design/agent-trust-memory.md): the proxy's own approvals on this lineage (or this
    revision of it) within the window that this human answer reverses. Each is a wrong
    answer the proxy gave alone; it counts against the autonomy rule and the agent's trust."""
    if (
        record.answered_by is not AnsweredBy.human
        or record.action not in censors.REVERSALS
        or params.regret_window <= 0
    ):
        return []
    return memory.store.proxy_answers_on(
        chunk.kind.value,
        chunk.lineage,
        record.n - params.regret_window,
        record.n,
        revision=chunk.revision if params.regret_scope == "revision" else None,
    )


def confidence_model(memory: PrincipalMemory) -> ConfidenceModel:
    return ConfidenceModel(
        entries={key: ContextEntry.model_validate_json(entry) for key, entry in context_entries(memory.store)}
    )


# -- artifacts -------------------------------------------------------------------


LAST_LINE_BLOCK = 4096
LAST_LINE_CAP = 1 << 20  # an entry longer than this has no readable position: rewritten from the log


def _last_line(path: Path) -> str:
    """The last non-blank line (blank lines between entries carry no position), read
    from the end in growing blocks up to 1 MB: every gate asks, and reading the whole
    megabyte each time cost a twelfth of a loaded worker's CPU (py-spy)."""
    if not path.exists():
        return ""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        block = LAST_LINE_BLOCK
        while True:
            chunk = min(size, block)
            f.seek(size - chunk)
            data = f.read(chunk)
            # Complete once a line break precedes the last non-blank line, or at the file's
            # start, or at the cap.
            if data.rstrip().rfind(b"\n") >= 0 or chunk == size or block >= LAST_LINE_CAP:
                break
            block *= 2
    lines = [line for line in data.splitlines() if line.strip()]
    return lines[-1].decode("utf-8", "replace") if lines else ""


def _interaction_line(record: OutcomeRecord) -> str:
    req = record.request
    return json.dumps(
        {
            "workflow_id": record.workflow_id,
            "gate_id": req.gate_id,
            "kind": req.kind.value,
            "state": req.state.value,
            "task_type": req.task_type,
            "question": req.question,
            "answered_by": record.answered_by.value,
            "responder": record.responder,
            "action": record.action.value,
            "response": record.response_text,
            "prior": record.prior.model_dump(exclude={"usage"}) if record.prior else None,
            "posterior": record.posterior.model_dump(exclude={"usage"}) if record.posterior else None,
            "surprise": record.surprise.model_dump(exclude={"usage"}) if record.surprise else None,
            "calibration": record.calibration.model_dump() if record.calibration else None,
            "dialog": [t.model_dump() for t in record.dialog],
            "n": record.n,
            "timestamp": record.at.isoformat() if record.at else None,
        },
        ensure_ascii=False,
    )


PATTERNS_HEADER = (
    "# Proxy patterns\n\n"
    "Agent and reviewer at each gate, oldest first. HUMAN: is the human's answer, or the "
    "proxy's when it acted on the human's behalf (marked). An empty HUMAN: is a timeout, "
    "not a silent approval.\n"
)
_SECTION_END = "<!-- outcome "  # each section ends with <!-- outcome SEQ -->
_HEADER_END = PATTERNS_HEADER.rstrip("\n").splitlines()[-1]


def _pattern_section(seq: int, r: OutcomeRecord) -> str:
    req = r.request
    stamp = r.at.isoformat(timespec="seconds") if r.at else f"N={r.n}"
    out = [
        "",
        f"## {req.state.value} | {req.task_type} | {req.gate_id} ({stamp})",
        f"AGENT: {(req.actor_message or req.question).strip()}",
    ]
    for t in r.dialog:
        if t.speaker == "agent":
            out.append(f"AGENT: {t.text.strip()}")
        else:
            out.append(f"HUMAN{' (proxy)' if t.answered_by is AnsweredBy.proxy else ''}: {t.text.strip()}")
    tag = "" if r.answered_by is AnsweredBy.human else f" ({r.answered_by.value})"
    out.append(f"HUMAN{tag}: [{r.action.value}] {r.response_text.strip()}")
    out.append(f"{_SECTION_END}{seq} -->")
    return "\n".join(out) + "\n"


def _resume_point(path: Path, seq_of_line) -> int:
    """The outcome seq the file's complete last entry ends at; a torn tail (a crash
    mid-append) is cut off first. Appends need no fsync: whatever a crash loses is
    appended again from the log on the next write."""
    last = _last_line(path)
    if not last:
        return 0
    seq = seq_of_line(last)
    if seq is not None:
        return seq
    # Walk back line by line in one read and one write (cutting a line per rewrite of
    # the whole file was quadratic in a torn entry's lines).
    text = path.read_text(encoding="utf-8", errors="replace")
    end = len(text.rstrip("\n"))
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        seq = seq_of_line(line) if line.strip() else None
        if seq is not None:
            _atomic_write(path, text[:end] + "\n")
            return seq
        end = start
        while end > 0 and text[end - 1] == "\n":
            end -= 1
    _atomic_write(path, PATTERNS_HEADER if path.name == PATTERNS_FILE else "")
    return 0


def _interaction_seq(memory: PrincipalMemory):
    def seq_of(line: str) -> int | None:
        try:
            return memory.store.outcome_seq(json.loads(line)["workflow_id"])
        except (ValueError, KeyError, TypeError):
            return None

    return seq_of


def _pattern_seq(line: str) -> int | None:
    if line.startswith(_SECTION_END) and line.endswith(" -->"):
        try:
            return int(line[len(_SECTION_END) : -4])
        except ValueError:
            return None
    return 0 if line == _HEADER_END else None


_SECTION_HEAD = re.compile(r"^## .* \| (?P<gate>\S+) \(", re.M)


def side_file_gates(directory: Path) -> tuple[Counter, Counter]:
    """Per gate id, how often it appears in a principal's side files: lines of
    proxy-interactions.jsonl and sections of proxy-patterns.md (each should be once)."""
    interactions, patterns = directory / INTERACTIONS_FILE, directory / PATTERNS_FILE
    lines = interactions.read_text(encoding="utf-8").splitlines() if interactions.exists() else []
    text = patterns.read_text(encoding="utf-8") if patterns.exists() else ""
    return (
        Counter(json.loads(x)["gate_id"] for x in lines if x.strip()),
        Counter(m["gate"] for m in _SECTION_HEAD.finditer(text)),
    )


def _append(path: Path, text: str) -> None:
    if text:
        with path.open("a", encoding="utf-8") as f:
            f.write(text)


_side_locks: dict[Path, threading.Lock] = {}
_side_locks_guard = threading.Lock()


def side_file_lock(memory: PrincipalMemory) -> threading.Lock:
    """The lock that makes this process the one writer of a principal's side files.
    Keyed by directory, not by object: a memory closed and reopened is the same files."""
    key = memory.dir.resolve()
    with _side_locks_guard:
        return _side_locks.setdefault(key, threading.Lock())


def write_artifacts(memory: PrincipalMemory) -> None:
    # Two writers would each read the same resume point and both append what follows it.
    with side_file_lock(memory):
        _write_artifacts(memory)


def _write_artifacts(memory: PrincipalMemory) -> None:
    d = memory.dir
    _atomic_write(d / CONFIDENCE_FILE, confidence_model(memory).model_dump_json(indent=2) + "\n")
    interactions = d / INTERACTIONS_FILE
    rows = memory.store.outcomes(after_seq=_resume_point(interactions, _interaction_seq(memory)))
    _append(interactions, "".join(_interaction_line(OutcomeRecord.model_validate_json(r)) + "\n" for _, r in rows))
    patterns = d / PATTERNS_FILE
    if not patterns.exists():
        _atomic_write(patterns, PATTERNS_HEADER)
    rows = memory.store.outcomes(after_seq=_resume_point(patterns, _pattern_seq))
    _append(patterns, "".join(_pattern_section(seq, OutcomeRecord.model_validate_json(r)) for seq, r in rows))
