"""Telling someone a human is needed: a gate's escalation or passed deadline, POSTed as
JSON to VICAR_WEBHOOK_URL. The URL (which may carry a token) stays in the worker's
settings; only the notice goes through history."""

from __future__ import annotations

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.config import Settings

# One POST's connect + read budget; the activity's retries handle a receiver that is down.
WEBHOOK_TIMEOUT_SECONDS = 10.0


class NotifyActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def shared(self) -> list:
        return [self.notify]

    @activity.defn(name=c.NOTIFY)
    async def notify(self, notice: c.Notice) -> bool:
        """POST the notice; False if no webhook is configured. The receiver may see one
        notice twice (a retry after a lost reply): `event_id` and the Idempotency-Key
        header are the same for every attempt."""
        url = self.settings.webhook_url
        if not url:
            return False
        try:
            async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_SECONDS) as http:
                reply = await http.post(
                    url,
                    content=notice.model_dump_json(),
                    headers={"Content-Type": "application/json", "Idempotency-Key": notice.event_id},
                )
        except httpx.HTTPError as exc:
            raise ApplicationError(f"webhook unreachable: {type(exc).__name__}") from None  # retried
        if reply.status_code >= 500 or reply.status_code == 429:
            raise ApplicationError(f"webhook answered {reply.status_code}")  # retried
        if reply.status_code >= 400:
            # The receiver refuses this notice (a wrong URL, a bad token): retrying won't help.
            raise ApplicationError(f"webhook refused the notice: {reply.status_code}", non_retryable=True)
        return True
