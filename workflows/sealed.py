"""What comes into a workflow from outside (its input, signals, updates), opened and
checked inside the workflow, never by the payload converter before it: a value that
fails there fails the workflow *task*, and a signal stays in history, so one bad
payload wedged whatever received it (issue 34).

The worker's codec never raises (vicar/runtime/codec.py): a payload it cannot open arrives as a
refusal, one it opened is marked with the key that opened it. Here:

- a payload this worker cannot open is refused: a start fails in one line, an update is
  rejected, a signal is logged and dropped;
- a payload that was not sealed is refused the same way when the worker has a codec:
  the payload key is then what lets a client write (docs/rules.md). Runs recorded before this
  check (no SEALED_WRITES marker in their history) replay as they ran, taking plain
  signals; their updates and the next runs are checked;
- not one argument, or a value of the wrong shape, is refused in one line, never with
  a TypeError in a handler (which fails the task too).

Handlers take `*args`: `raw_input` gives them the raw payload (RawValue) when there is
exactly one, and the SDK's own conversion when there are none or several."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    import vicar.runtime.codec as codec
    from vicar.errors import validation_summary

T = TypeVar("T")
NOT_SEALED = (
    "not sealed with the payload key: with a payload codec configured, only a client holding "
    "the workers' keys may write (docs/codec.md)"
)


class Refused(ValueError):
    """A write this workflow does not take, in one line."""


def sealed_writes() -> bool:
    """Whether this run refuses plain signals and a plain input (memoized per run)."""
    return workflow.patched(c.SEALED_WRITES)


def opened_with(arg: Any) -> str | None:
    """The key that opened an argument's payload (None: plain, or already converted)."""
    if not isinstance(arg, RawValue):
        return None
    key = arg.payload.metadata.get(codec.OPENED_WITH)
    return key.decode(errors="replace") if key else None


def one_arg(args: tuple, kind: type[T], what: str, *, sealed: bool) -> T:
    """The single argument of a write as `kind`; Refused names what is wrong. `sealed`:
    a plain payload is refused too."""
    if len(args) != 1:
        raise Refused(f"{what}: expected one argument, got {len(args)}")
    try:
        return value_of(args[0], kind, sealed=sealed)
    except Refused as exc:
        raise Refused(f"{what}: {exc}"[:2000]) from None


def value_of(arg: Any, kind: type[T], *, sealed: bool) -> T:
    """One argument as `kind`, or Refused saying why (not prefixed)."""
    if isinstance(arg, RawValue):
        payload = arg.payload
        if payload.metadata.get("encoding") == codec.REFUSED:
            raise Refused(codec.refusal_line(payload, "this worker"))
        if sealed and payload.metadata.get(codec.OPENED_WITH) == b"":
            # Marked plain by the codec; no mark at all: a worker with no codec, which has
            # no key to ask for.
            raise Refused(NOT_SEALED)
        try:
            return workflow.payload_converter().from_payload(payload, kind)
        except ValidationError as exc:
            raise Refused(validation_summary(exc)) from None
        except Exception as exc:  # not JSON, an unknown encoding
            raise Refused(f"{type(exc).__name__}: {exc}") from None
    if sealed:
        # Converted by the SDK already (a handler without raw_input): whether it was
        # sealed cannot be told, so it is not taken.
        raise Refused("expected one sealed argument")
    try:
        return TypeAdapter(kind).validate_python(arg)
    except ValidationError as exc:
        raise Refused(validation_summary(exc)) from None


def signal_arg(args: tuple, kind: type[T], what: str) -> T | None:
    """A signal's argument, or None after logging why it is dropped: a signal cannot be
    refused to its sender, and it stays in history, so refusing must not raise."""
    try:
        return one_arg(args, kind, what, sealed=sealed_writes())
    except Refused as exc:
        workflow.logger.warning("ignored %s", exc)
        return None


class KeyWatch:
    """For a workflow that runs for ever (the brain): continue as new once a write comes
    sealed with another key than the run's input. Its history then holds the new key
    only, so dropping the old key (rotation's last step, docs/codec.md) leaves it able to
    replay, where before a brain started under the old key could not replay at all and
    held every gate of its principal `queued` (issue 34). Decided from what history
    holds (each write's key is the codec's mark on its payload), so a replay decides the
    same; runs recorded before this (no REKEY_BRAIN marker) go on as they ran."""

    def __init__(self, args: tuple) -> None:
        self.sealed_with = opened_with(args[0]) if len(args) == 1 else None
        self._changed = False
        self._before = False  # a run recorded before REKEY_BRAIN: never continues for a key

    def saw(self, args: tuple) -> None:
        """A write taken: note when it was sealed with another key than the run's input."""
        key = opened_with(args[0]) if len(args) == 1 else None
        if key is not None and key != self.sealed_with and not self._before:
            self._changed = True

    @property
    def changed(self) -> bool:
        """For a wait condition: something to decide (no command)."""
        return self._changed

    def due(self) -> bool:
        """Whether to continue as new now (may record the patch marker: not in a condition)."""
        if self._changed and not workflow.patched(c.REKEY_BRAIN):
            self._changed, self._before = False, True
        return self._changed
