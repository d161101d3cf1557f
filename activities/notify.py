"""Telling someone a human is needed: a gate's escalation or passed deadline, POSTed as
JSON to VICAR_WEBHOOK_URL (Vicar's Notice; a chat message with VICAR_WEBHOOK_KIND=slack;
a CloudEvent with `cloudevents`), signed as Standard Webhooks says with
VICAR_WEBHOOK_SECRET (vicar/webhook_sign.py). The URL (which may carry a token) and the
secret stay in the worker; only the notice goes through history. Also what the person is
shown of the artifact's files: the worker is the one that may read them."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import quote

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.artifacts import read_artifact_file
from vicar.errors import ArtifactRefused, InvalidInput
from vicar.models.chat import slack_message
from vicar.models.plain import plain_text
from vicar.models.view import ArtifactFile, ExcerptInput
from vicar.proxy.concerns import fitting_words
from vicar.proxy.reasons import details_reason
from vicar.settings import ReadAtUse, Settings, secret
from vicar.webhook_sign import CLOUDEVENTS_TYPE, cloudevent, parse_secrets, signed_headers

# One POST's connect + read budget; the activity's retries handle a receiver that is down.
WEBHOOK_TIMEOUT_SECONDS = 10.0


def chat_message(notice: c.Notice, inbox_url: str | None) -> dict:
    """The chat message, with what a reviewer reads in words: why the gate came to them
    and the proxy's words without a sentence that turns against its action."""
    g = notice.gate
    why = plain_text(details_reason(g)) if notice.event == "escalated" else ""
    # No action, no words: the text is then the proxy's own remark on why it has no guess.
    words = fitting_words(g.proxy_action.value, g.proxy_text, g.artifact_excerpt) if g.proxy_action else ""
    return slack_message(notice, inbox_url, why=why, words=words)


class NotifyActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def shared(self) -> list:
        return [self.notify, self.artifact_excerpts]

    @activity.defn(name=c.ARTIFACT_EXCERPTS)
    async def artifact_excerpts(self, want: ExcerptInput) -> list[ArtifactFile]:
        """The start of each file, within the budget over all of them; a file that cannot
        be read is named with why (the gate shows it rather than failing). Reads only:
        a retry returns the same unless the file changed meanwhile."""
        # Async, its reads on a thread: a sharded worker's shared queue (where this runs
        # with the other shared activities) has no activity executor for sync activities.
        return await asyncio.to_thread(self._excerpts, want)

    def _excerpts(self, want: ExcerptInput) -> list[ArtifactFile]:
        out: list[ArtifactFile] = []
        left = max(want.budget, 0)
        cap = self.settings.limits.artifact_file_bytes
        for path in want.paths:
            if left <= 0:
                out.append(ArtifactFile(path=path, truncated=True, error="not shown: the view's bound is spent"))
                continue
            try:
                # One byte past the budget tells whether the file goes on.
                text = read_artifact_file(path, self.settings.artifact_roots, min(left + 1, cap))
            except ArtifactRefused as exc:
                out.append(ArtifactFile(path=path, error=str(exc)))
                continue
            cut = len(text.encode("utf-8", "replace")) > left
            excerpt = text[:left] if cut else text
            left -= len(excerpt)
            out.append(ArtifactFile(path=path, excerpt=excerpt, truncated=cut))
        return out

    @activity.defn(name=c.NOTIFY)
    async def notify(self, notice: c.Notice) -> bool:
        """POST the notice; False if no webhook is configured. The receiver may see one
        notice twice (a retry after a lost reply): `event_id` and the Idempotency-Key
        header are the same for every attempt."""
        url = self.settings.webhook_url
        if not url:
            return False
        content_type = "application/json"
        if self.settings.webhook_kind == "slack":
            body = json.dumps(chat_message(notice, self.settings.inbox_url))
        elif self.settings.webhook_kind == "cloudevents":
            body = json.dumps(cloudevent(notice, f"/vicar/{quote(self.settings.task_queue, safe='')}"))
            content_type = CLOUDEVENTS_TYPE
        else:
            body = notice.model_dump_json()
        content = body.encode()
        try:
            # Read at each notice: a rotation takes effect without a restart. A malformed
            # secret is the operator's to fix, not a retry's (InvalidInput: one line).
            keys = parse_secrets(text) if (text := secret(ReadAtUse().webhook_secret)) else []
        except InvalidInput as exc:
            raise ApplicationError(str(exc), non_retryable=True) from None
        # This attempt's time: a receiver refuses a signature older than its tolerance
        # (five minutes in the reference libraries), so a retry signs afresh.
        headers = signed_headers(keys, notice.event_id, int(time.time()), content)
        try:
            async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_SECONDS) as http:
                reply = await http.post(
                    url,
                    content=content,
                    headers={"Content-Type": content_type, "Idempotency-Key": notice.event_id, **headers},
                )
        except httpx.HTTPError as exc:
            raise ApplicationError(f"webhook unreachable: {type(exc).__name__}") from None  # retried
        if reply.status_code >= 500 or reply.status_code == 429:
            raise ApplicationError(f"webhook answered {reply.status_code}")  # retried
        if reply.status_code >= 400:
            # The receiver refuses this notice (a wrong URL, a bad token): retrying won't help.
            raise ApplicationError(f"webhook refused the notice: {reply.status_code}", non_retryable=True)
        return True
