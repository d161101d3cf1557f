"""A gate's notice as a chat message (VICAR_WEBHOOK_KIND=slack): the JSON that Slack's
incoming webhooks take (`text`, the fallback and notification line, and `blocks`), which
Mattermost, Rocket.Chat and others accept too. One line says what happened to which
gate (its question, never its hashed id), why it came to the person in words and what
the proxy would answer; a link opens its inbox page (VICAR_INBOX_URL), where it is
answered, and on an escalation an Approve button answers it from Slack itself
(vicar/inbox/slack_actions.py). No Reject button: a reject needs the person's words, which
a tap does not carry (the gate's page takes them). Vicar's machinery (a guard's name, the
CfA tags, raw scores) stays in the webhook's JSON and in the logs.

Every text in it came from a request, an answer or memory: Slack's mrkdwn reads `<url|x>`
as a link and `<!channel>` as a mention, so `&`, `<` and `>` are escaped as Slack asks."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from vicar.contracts import Notice
from vicar.models.plain import state_words
from vicar.models.sure import gate_confidence_words
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


def guess_words(notice: Notice) -> str:
    """What the proxy would answer, in words ("" : it has no guess)."""
    g = notice.gate
    if g.proxy_action is None:
        return ""
    said = gate_confidence_words(g)
    return f"Vicar would {g.proxy_action.value}" + (f" ({said})" if said else "")


def summary(notice: Notice) -> str:
    """One line: what is asked, what happened, of what kind, and the proxy's guess."""
    g = notice.gate
    what = _HEADLINE.get(notice.event, notice.event).format(principal=g.principal)
    guess = guess_words(notice)
    return excerpt_line(
        f"{g.question} · {what} · {state_words(g.state)}, {g.task_type}" + (f" · {guess}" if guess else ""),
        LINE_CHARS,
    )


# The buttons that answer (docs/slack.md): Slack POSTs a tap to the inbox's /slack/actions
# with the action_id and the value, the gate's workflow id.
# Reject stays known to the inbox: a message sent before it lost its button may still carry one.
# "Approve, ask me first" approves and keeps the gate's kind of action with the person.
ASK_FIRST_ACTION = "vicar.approve_ask_first"
ANSWER_ACTIONS = {"vicar.approve": "approve", ASK_FIRST_ACTION: "approve", "vicar.reject": "reject"}
OPEN_ACTION, ACTIONS_BLOCK = "vicar.open", "vicar.gate"


def answer_buttons(notice: Notice) -> list[dict[str, Any]]:
    """Approve, and Approve with "ask me first", on a gate that waits for the person (an
    escalation) only."""
    if notice.event != "escalated":
        return []
    wid = notice.gate.workflow_id or f"vicar-gate/{notice.gate.gate_id}"
    return [
        {
            "type": "button",
            "action_id": "vicar.approve",
            "text": {"type": "plain_text", "text": "Approve"},
            "style": "primary",
            "value": wid,
        },
        {
            "type": "button",
            "action_id": ASK_FIRST_ACTION,
            "text": {"type": "plain_text", "text": "Approve, ask me first"},
            "value": wid,
        },
    ]


def slack_message(notice: Notice, inbox_url: str | None, why: str = "", words: str | None = None) -> dict[str, Any]:
    """The chat message; `why`: why the gate came to the person, in words, and `words`:
    the proxy's words as shown (none that turn against its action), both made by the
    worker from vicar.proxy (which this module may not import)."""
    g = notice.gate
    link = gate_link(inbox_url, g.workflow_id or f"vicar-gate/{g.gate_id}")
    line = summary(notice)
    body = [f"*{escape(line)}*"]
    if why:
        body.append(escape(f"Why you: {why}"))
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
    words = (g.proxy_text if words is None else words).strip()
    if words:
        said = "*The proxy's words:*\n" + escape(words)
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
