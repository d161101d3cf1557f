"""What comes into a workflow from outside (its input, signals, updates), opened and
checked inside the workflow, never by the payload converter before it: a value that
fails there fails the workflow *task*, and a signal stays in history, so one bad
payload would wedge whatever received it.

The worker's codec never raises (vicar/runtime/codec.py): a payload it cannot open arrives as a
refusal, one it opened is marked with the key that opened it. Here:

- a payload this worker cannot open is refused: a start fails in one line, an update is
  rejected, a signal is logged and dropped;
- a payload that was not sealed is refused the same way when the worker has a codec:
  the payload key is then what lets a client write (docs/rules.md);
- not one argument, or a value of the wrong shape, is refused in one line, never with
  a TypeError in a handler (which fails the task too).

Runs and handlers take `*args` declared `@raw_argument` (workflows/inputs.py): one
argument arrives as the raw payload (RawValue), none or several as the SDK converts them."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    import vicar.runtime.codec as codec
    from vicar.errors import RefusedWrite, validation_summary

T = TypeVar("T")
NOT_SEALED = (
    "not sealed with the payload key: with a payload codec configured, only a client holding "
    "the workers' keys may write (docs/codec.md)"
)


def opened_with(args: tuple) -> str | None:
    """The key that opened a write's one argument (None: plain, or not one raw argument)."""
    if len(args) != 1 or not isinstance(args[0], RawValue):
        return None
    key = args[0].payload.metadata.get(codec.OPENED_WITH)
    return key.decode(errors="replace") if key else None


def one_arg(args: tuple, kind: type[T], what: str) -> T:
    """The single argument of a write as `kind`; RefusedWrite names what is wrong."""
    if len(args) != 1:
        raise RefusedWrite(f"{what}: expected one argument, got {len(args)}")
    try:
        return value_of(args[0], kind)
    except RefusedWrite as exc:
        raise RefusedWrite(f"{what}: {exc}"[:2000]) from None


def value_of(arg: Any, kind: type[T]) -> T:
    """One argument as `kind`, or RefusedWrite saying why (not prefixed)."""
    if not isinstance(arg, RawValue):
        # Converted by the SDK already: whether it was sealed cannot be told, so it is not taken.
        raise RefusedWrite("expected one sealed argument")
    payload = arg.payload
    if payload.metadata.get("encoding") == codec.REFUSED:
        raise RefusedWrite(codec.refusal_line(payload, "this worker"))
    if payload.metadata.get(codec.OPENED_WITH) == b"":
        # Marked plain by the codec; no mark at all: a worker with no codec, which has
        # no key to ask for.
        raise RefusedWrite(NOT_SEALED)
    try:
        return workflow.payload_converter().from_payload(payload, kind)
    except ValidationError as exc:
        raise RefusedWrite(validation_summary(exc)) from None
    except Exception as exc:  # not JSON, an unknown encoding
        raise RefusedWrite(f"{type(exc).__name__}: {exc}") from None


def signal_arg(args: tuple, kind: type[T], what: str) -> T | None:
    """A signal's argument, or None after logging why it is dropped: a signal cannot be
    refused to its sender, and it stays in history, so refusing must not raise."""
    try:
        return one_arg(args, kind, what)
    except RefusedWrite as exc:
        workflow.logger.warning("ignored %s", exc)
        return None


class KeyWatch:
    """For a workflow that runs for ever (the brain): continue as new once a write comes
    sealed with another key than the run's input. Its history then holds the new key
    only, so dropping the old key (rotation's last step, docs/codec.md) leaves it able to
    replay, where before a brain started under the old key could not replay at all and
    held every gate of its principal `queued`. Decided from what history
    holds (each write's key is the codec's mark on its payload), so a replay decides the
    same."""

    def __init__(self, args: tuple) -> None:
        self.sealed_with = opened_with(args)
        self.changed = False  # a write came sealed with another key: continue as new

    def saw(self, args: tuple) -> None:
        """A write taken: note when it was sealed with another key than the run's input."""
        key = opened_with(args)
        if key is not None and key != self.sealed_with:
            self.changed = True
