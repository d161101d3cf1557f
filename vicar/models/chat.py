"""A gate's notice as a chat message (VICAR_WEBHOOK_KIND=slack): the JSON that Slack's
incoming webhooks take (`text`, the fallback and notification line, and `blocks`), which
Mattermost, Rocket.Chat and others accept too. One line says what happened to which
gate; a link opens its inbox page (VICAR_INBOX_URL), where it is answered, and on an
escalation Approve / Reject buttons answer it from Slack itself (vicar/inbox/slack_actions.py).

Every text in it came from a request, an answer or memory: Slack's mrkdwn reads `<url|x>`
as a link and `<!channel>` as a mention, so `&`, `<` and `>` are escaped as Slack asks."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from vicar.contracts import Notice
from vicar.models.view import excerpt_line

# Slack refuses a section text over 3,000 characters and a `text` over 40,000; a chat
# message is a glimpse, the page has the rest.
SECTION_CHARS = 2900
LINE_CHARS = 300

_HEADLINE = {
    "escalated": "waits for {principal}",
    "timed_out": "passed its deadline unanswered ({principal})",
    "overruled": "was marked wrong after the fact ({principal})",
    "autonomy_withdrawn": "saw {principal}'s proxy lose its autonomy here",
}


def escape(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def gate_link(inbox_url: str | None, workflow_id: str) -> str | None:
    """The gate's inbox page (the inbox routes /gates/<workflow id>)."""
    return f"{inbox_url.rstrip('/')}/gates/{quote(workflow_id, safe='/:@')}" if inbox_url else None


def summary(notice: Notice) -> str:
    """One line: which gate, what happened, what is asked and the proxy's guess."""
    g = notice.gate
    what = _HEADLINE.get(notice.event, notice.event).format(principal=g.principal)
    guess = f"{g.proxy_action.value} " if g.proxy_action else ""
    conf = f"{g.proxy_confidence:.2f}" if g.proxy_confidence is not None else "?"
    return excerpt_line(
        f"Gate {g.gate_id} {what} · {g.state.value} / {g.task_type}: {g.question} · proxy: {guess}{conf}",
        LINE_CHARS,
    )


# The buttons that answer (docs/slack.md): Slack POSTs a tap to the inbox's /slack/actions
# with the action_id and the value, the gate's workflow id.
ANSWER_ACTIONS = {"vicar.approve": "approve", "vicar.reject": "reject"}
OPEN_ACTION, ACTIONS_BLOCK = "vicar.open", "vicar.gate"


def answer_buttons(notice: Notice) -> list[dict[str, Any]]:
    """Approve and Reject, on a gate that waits for the person (an escalation) only."""
    if notice.event != "escalated":
        return []
    wid = notice.gate.workflow_id or f"vicar-gate/{notice.gate.gate_id}"
    style = {"approve": "primary", "reject": "danger"}
    return [
        {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": action.capitalize()},
            "style": style[action],
            "value": wid,
        }
        for action_id, action in ANSWER_ACTIONS.items()
    ]


def slack_message(notice: Notice, inbox_url: str | None) -> dict[str, Any]:
    g = notice.gate
    link = gate_link(inbox_url, g.workflow_id or f"vicar-gate/{g.gate_id}")
    line = summary(notice)
    body = [f"*{escape(line)}*"]
    if g.artifact_excerpt:
        body.append("> " + escape(excerpt_line(g.artifact_excerpt)))
    facts = [f"from agent {g.upstream_agent}" if g.upstream_agent else ""]
    deadline = notice.deadline or g.deadline
    if deadline is not None:
        facts.append(f"deadline {deadline.isoformat(timespec='seconds')}")
    if any(facts):
        body.append(escape(" · ".join(f for f in facts if f)))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip("\n".join(body), SECTION_CHARS)}}
    ]
    words = g.proxy_text.strip()
    if words:
        said = f"*The proxy's words* (guard {escape(g.calibration_guard or '?')}):\n" + escape(words)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(said, SECTION_CHARS)}})
    if g.prereview:
        items = "\n".join(f"• {escape(_clip(i.text, LINE_CHARS))} _({escape(i.action)})_" for i in g.prereview[:3])
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": _clip("Their own past words:\n" + items, 2900)}],
            }
        )
    buttons = answer_buttons(notice)
    if link:
        open_button = {"type": "plain_text", "text": "Open the gate"}
        buttons.append({"type": "button", "action_id": OPEN_ACTION, "text": open_button, "url": link})
    if buttons:
        blocks.append({"type": "actions", "block_id": ACTIONS_BLOCK, "elements": buttons})
    if not link:
        hint = f"vicar gate show {g.gate_id}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(_clip(hint, LINE_CHARS))}]})
    text = escape(line) + (f" <{link}|open>" if link else "")
    return {"text": text, "blocks": blocks}
