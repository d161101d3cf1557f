"""A workflow's input, and how its run and handlers receive what a client sent.

Every Vicar workflow takes `*args` and validates them here or in workflows/sealed.py: a
start with no input, two inputs or a wrong shape (anyone who may start a workflow can
send one) then fails the workflow in its first task with one non-retryable line, and a
signal or update like it is dropped or rejected. Typed parameters would let the SDK
convert them first, and a failed conversion fails the workflow *task*, which Temporal
retries for ever with nothing shown as failed (a brain stuck that way held every gate of
its principal `queued`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from vicar.errors import INVALID_WORKFLOW_INPUT, validation_summary
    from vicar.workflows.sealed import value_of

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable)


def raw_argument(fn: F) -> F:
    """For a run, `@workflow.init`, handler or validator written `(self, *args: RawValue)`:
    declares the one RawValue argument it expects, so the SDK hands one argument over
    undecoded and these modules open and check it (a payload that is not JSON, e.g.
    `temporal workflow start --input-base64`, failed the task again and again when the
    SDK decoded it first).

    The SDK takes the types it converts a handler's arguments to from the handler's
    signature (temporalio.common._type_hints_from_func), and uses them only when their
    count matches the arguments'; a `*args` parameter declares none. Python's own way
    for a callable to declare the signature introspection reports is `__signature__`
    (inspect.signature, which the SDK reads, honours it): set here to `(self, args:
    RawValue, /)`. Python still calls the function as written, so no input or two reach
    it too, converted by the SDK, and are refused in one line."""
    sig = inspect.signature(fn)
    me, args = sig.parameters.values()
    if args.kind is not inspect.Parameter.VAR_POSITIONAL:
        raise TypeError(f"{fn.__qualname__}: raw_argument declares a `*args` parameter")
    one = [p.replace(kind=inspect.Parameter.POSITIONAL_ONLY) for p in (me, args)]
    fn.__signature__ = sig.replace(parameters=one)  # type: ignore[attr-defined]
    return fn


def one_input(
    args: tuple,
    model: type[M],
    what: str,
    check: Callable[[M], None] | None = None,
    error_type: str = INVALID_WORKFLOW_INPUT,
) -> M:
    """The single argument as `model`, then `check` (raising ValueError); or fail the
    workflow with "invalid <what>: <why>", on one line."""
    if len(args) != 1:
        why = f"expected one {model.__name__} argument, got {len(args)}"
    else:
        try:
            value = value_of(args[0], model)
            if check is not None:
                check(value)
            return value
        except ValidationError as exc:
            why = validation_summary(exc)
        except ValueError as exc:  # RefusedWrite, the check's, and the models' own (InvalidInput is one)
            why = str(exc)
        except Exception as exc:  # not JSON, or not an object
            why = f"{type(exc).__name__}: {exc}"
    why = " ".join(why.split())
    raise ApplicationError(f"invalid {what}: {why[:2000]}", type=error_type, non_retryable=True)
