"""The audit trail's contract (workflows/audit.py, docs/audit.md): one page of a
principal's gate records read where the memory is (AuditPageRequest -> AuditPage), and a
review of an answer the proxy gave alone (ReviewRequest -> ReviewResult); each runs on
the memory's shard after LOCATE_MEMORY."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from vicar.contracts.handles import Handles

AUDIT_WORKFLOW = "VicarAudit"
REVIEW_WORKFLOW = "VicarReview"
AUDIT_HANDLES = Handles(AUDIT_WORKFLOW)
REVIEW_HANDLES = Handles(REVIEW_WORKFLOW)


def audit_workflow_id(principal: str, page_id: str) -> str:
    return f"vicar-audit/{principal}/{page_id}"


def review_workflow_id(review_id: str) -> str:
    return f"vicar-review/{review_id}"


LOCATE_MEMORY = "locate_memory"  # principal -> MemoryPlace (any worker)
AUDIT_PAGE = "audit_page"  # AuditPageRequest -> AuditPage
RECORD_REVIEW = "record_review"  # ReviewRequest -> ReviewResult
AUDIT_ACTIVITIES = (LOCATE_MEMORY, AUDIT_PAGE, RECORD_REVIEW)

# A reader waits for its page: a few quick retries, then the client hears why. (A
# review's `overruled` notice is sent with the gate's NOTIFY_OPTIONS.)
READ_OPTIONS: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=5
    ),
)
