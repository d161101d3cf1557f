"""Vicar's own terms in the words a reviewer reads (the inbox, chat notices): the CfA
states' tags (INTENT_ASSERT ...) stay in the data, the JSON and the shell; a person reads
what is being asked of them."""

from __future__ import annotations

import re

STATE_WORDS = {"INTENT_ASSERT": "intent", "PLAN_ASSERT": "plan", "WORK_ASSERT": "finished work"}


def state_words(state: object) -> str:
    """'plan' for PLAN_ASSERT (an enum member or its value); anything else as it is."""
    value = getattr(state, "value", state)
    return STATE_WORDS.get(str(value), str(value))


_TAG = re.compile(r"\b(?:INTENT|PLAN|WORK)_ASSERT\b")
# The request's setting behind a reason ("escalation mode"): the shell and the audit say it,
# a reviewer reads what it means.
_MODE_NOTE = re.compile(r"\s*\(escalation mode “(?:always|never)”\)")
_MODE_WORDS = {"(its escalation mode, or no clear answer)": "(it asks every time, or Vicar had no clear answer)"}


def plain_text(text: str) -> str:
    """`text` (a reason, a pause's scope, a rule's description, a health line) with each
    state's tag in words and no name of a request's setting."""
    for said, words in _MODE_WORDS.items():
        text = text.replace(said, words)
    return _TAG.sub(lambda m: STATE_WORDS[m.group(0)], _MODE_NOTE.sub("", text))
