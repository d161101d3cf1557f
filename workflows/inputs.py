"""A workflow's input, checked inside the workflow.

Every Vicar workflow takes `*args` and validates them here: a start with no input, two
inputs or a wrong shape (anyone who may start a workflow can send one) then fails the
workflow in its first task with one non-retryable line. Typed parameters would let the
SDK convert them first, and a failed conversion fails the workflow *task*, which Temporal
retries for ever with nothing shown as failed (a brain stuck that way held every gate of
its principal `queued`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from vicar.errors import validation_summary
    from vicar.workflows.sealed import sealed_writes, value_of

M = TypeVar("M", bound=BaseModel)
C = TypeVar("C", bound=type)
INVALID_WORKFLOW_INPUT = "InvalidWorkflowInput"


def raw_input(cls: C) -> C:
    """Under @workflow.defn: one input arrives as RawValue, undecoded (`*args` alone
    would have the SDK decode it as JSON first, and a payload that is not JSON, e.g.
    `temporal workflow start --input-base64`, failed the task again and again). The SDK
    uses its types only when their count matches the inputs', so no input or two still
    reach one_input, decoded, and are refused there. The same for every signal and
    update handler taking `*args`: workflows/sealed.py opens and checks them."""
    defn = getattr(cls, "__temporal_workflow_definition")
    object.__setattr__(defn, "arg_types", [RawValue])  # the SDK sets it the same way (_Definition.__post_init__)
    for handler in (*defn.signals.values(), *defn.updates.values()):
        params = list(inspect.signature(handler.fn).parameters.values())[1:]  # after self
        if [p.kind for p in params] == [inspect.Parameter.VAR_POSITIONAL]:
            object.__setattr__(handler, "arg_types", [RawValue])
    return cls


def one_input(
    args: tuple,
    model: type[M],
    what: str,
    check: Callable[[M], None] | None = None,
    error_type: str = INVALID_WORKFLOW_INPUT,
) -> M:
    """The single argument as `model`, then `check` (raising ValueError); or fail the
    workflow with "invalid <what>: <why>"."""
    if len(args) != 1:
        why = f"expected one {model.__name__} argument, got {len(args)}"
    else:
        try:
            if isinstance(args[0], RawValue):
                # A plain input: refused, except in runs recorded before the check.
                value = value_of(args[0], model, sealed=sealed_writes())
            else:
                value = model.model_validate(args[0])
            if check is not None:
                check(value)
            return value
        except ValidationError as exc:
            why = validation_summary(exc)
        except ValueError as exc:  # Refused, the check's, and the models' own (InvalidInput is one)
            why = str(exc)
        except Exception as exc:  # not JSON, or not an object
            why = f"{type(exc).__name__}: {exc}"
    raise ApplicationError(f"invalid {what}: {why[:2000]}", type=error_type, non_retryable=True)
