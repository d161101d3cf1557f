"""Errors meant for the user: the CLI prints them as one line, no traceback.

Each kind carries the process exit code the CLI ends with, so scripts can tell a
typo from a dead server without parsing text:

    1  general failure (VicarError)
    2  invalid input: a bad request, flag, file or answer (typer's own usage errors are 2 too)
    3  not found: no such gate, session or principal memory
    4  unreachable: Temporal cannot be reached
    5  conflict / refused: the gate is not waiting, another answer won, the gate id exists
    6  broken store: a principal's memory.db cannot be read
    7  not responding: the gate cannot take the answer (its workflow task fails, or no worker runs it)
    8  pending: the gate has no result yet (`vicar gate result` without waiting, or its wait ran out)
    9  not installed: the command needs an optional part of the install (an extra, or the model's weights)
   15  disk full: a principal's memory cannot be written for want of space (nothing is damaged)
   16  not reviewable: `vicar review` on a gate the proxy did not answer alone

`vicar gate start --wait` ends with the gate's outcome: 0 approve (or a question's
answer), 10 correct, 11 reject, 12 hold, 13 withdraw, 14 timed out (nobody answered
by the gate's deadline).

   70  unexpected error (a bug, or a failure nothing above describes); VICAR_DEBUG=1 shows the traceback
  130  interrupted (Ctrl-C)
"""

# The kinds the memory raises are defined on the ground floor; this is where the rest of
# Vicar takes them from, with the kinds below.

from vicar.memory.diskfull import DiskFull  # noqa: F401
from vicar.memory.errors import BrokenStore, Conflict, InvalidInput, NotInstalled, VicarError  # noqa: F401

UNEXPECTED = 70
OUTCOME_EXIT = {"approve": 0, "answer": 0, "correct": 10, "reject": 11, "hold": 12, "withdraw": 13}
TIMED_OUT_EXIT = 14
INTERRUPTED = 130
# ApplicationError types Vicar raises (what a client or a workflow can tell apart), each
# named once here.
# A gate whose input is not a valid GateRequest (non-retryable: the workflow fails at
# once, whoever started it); the same for a move.
INVALID_GATE_REQUEST = "InvalidGateRequest"
INVALID_MOVE_INPUT = "InvalidMoveInput"
INVALID_WORKFLOW_INPUT = "InvalidWorkflowInput"  # the other workflows' (workflows/inputs.py)
# A principal's memory that cannot be read or written.
STORE_UNAVAILABLE = "StoreUnavailable"
ANSWER_REFUSED = "AnswerRefused"  # the respond update refused the answer
ARTIFACT_REFUSED = "ArtifactRefused"  # the request's artifact path is refused
INVALID_STEP_INPUT = InvalidInput.__name__  # a move step's input
TRANSFER_ERROR = "TransferError"
BRAIN_UNUSABLE = "BrainUnusable"
ANSWER_NOT_IN_HISTORY = "AnswerNotInHistory"  # retryable: the event is not in history yet
NO_MEMORY = "NoMemory"  # the audit trail of a principal with no memory on this deployment
REFUSED_PAYLOAD = "RefusedPayload"  # a workflow's argument it cannot read (vicar/runtime/codec.py)
ERROR_TYPES = (
    INVALID_GATE_REQUEST,
    INVALID_MOVE_INPUT,
    INVALID_WORKFLOW_INPUT,
    STORE_UNAVAILABLE,
    ANSWER_REFUSED,
    ARTIFACT_REFUSED,
    INVALID_STEP_INPUT,
    TRANSFER_ERROR,
    BRAIN_UNUSABLE,
    ANSWER_NOT_IN_HISTORY,
    NO_MEMORY,
    REFUSED_PAYLOAD,
)


def validation_summary(exc) -> str:
    """A pydantic ValidationError as one line: `where: what; ...`."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e["loc"]) or "input"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


class NotFound(VicarError):
    exit_code = 3


class Unreachable(VicarError):
    exit_code = 4


class NotResponding(VicarError):
    exit_code = 7


class Pending(VicarError):
    exit_code = 8


class NotReviewable(VicarError):
    """A review of a gate the proxy did not answer alone (docs/audit.md)."""

    exit_code = 16


class DataDirBusy(Conflict):
    """Another process already serves this data directory on this task queue."""


class CodecKeyError(VicarError):
    """A payload this process cannot open, or keys it cannot read: one line, never the key."""


class RefusedWrite(ValueError):
    """A write a workflow does not take (its input, a signal's or an update's argument:
    not one, not sealed, not openable, the wrong shape), in one line (workflows/sealed.py).
    Raised inside workflow code: an update's validator turns it into the rejection, a
    signal is logged and dropped, a start fails with it (workflows/inputs.py)."""


class TurnRefused(Exception):
    """The brain could not hand out an N: the counter's store is unavailable (the reason
    goes to the holder, whose gate then asks the human; workflows/brain.py)."""


class ArtifactRefused(InvalidInput):
    """An artifact path that is not read: the proxy must not decide without its artifact.
    str() is the short reason anyone may be shown; `detail` is for the worker's log."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail or reason


class SettingsError(InvalidInput):
    """Environment values the settings refuse, one line each (vicar/settings/source.py):
    the CLI and the worker print every line, so one start names every bad value."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
