"""Reading an activity's failure in workflow code."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError


def cause_message(exc: ActivityError | ApplicationError) -> str:
    """The innermost cause's message. A regular activity's failure arrives as an
    ActivityError around the cause; a local activity's as the cause itself."""
    cause = exc.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return getattr(cause, "message", None) or str(cause or exc)
