"""Reading an activity's failure in workflow code."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception


def cause_message(exc: ActivityError | ApplicationError) -> str:
    """The innermost cause's message. A regular activity's failure arrives as an
    ActivityError around the cause; a local activity's as the cause itself."""
    cause = exc.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or exc)


def is_cancel(exc: BaseException) -> bool:
    """The workflow is being cancelled: an activity it awaited was cancelled with it, and
    arrives as an ActivityError. A step that shrugs off its activity's failure must not
    shrug this off (a gate cancelled while it told the webhook went on waiting)."""
    return is_cancelled_exception(exc)
