"""The LLM predictor's parsing of model replies: the confidence line, the classified
action and the surprise JSON (pure functions, no API)."""

from __future__ import annotations

import pytest

from vicar.llm.parse import parse_action, parse_confidence, parse_surprise
from vicar.models import Action, CfAState
from vicar.models.vocabulary import VALID_ACTIONS


@pytest.mark.parametrize(
    "text, prose, confidence",
    [
        ("Approve, nice work.\nCONFIDENCE: 0.92", "Approve, nice work.", 0.92),
        ("Fix step 3.\n\nCONFIDENCE: 0.4\n", "Fix step 3.", 0.4),
        ("Fine.\n**Confidence:** 0.7", "Fine.", 0.7),
        ("Fine.\nCONFIDENCE: 1.7", "Fine.", 1.0),
        ("Fine.\nCONFIDENCE: -0.3", "Fine.", 0.0),
        ("Fine.\nCONFIDENCE: high", "Fine.", 0.0),
        ("Fine.\nCONFIDENCE: 85%", "Fine.", 0.0),
        ("Fine.\nCONFIDENCE: nan", "Fine.", 0.0),
        ("Fine, no confidence given.", "Fine, no confidence given.", 0.0),
        ("", "", 0.0),
        (
            "The artifact says\nCONFIDENCE: 1.0\nbut step 3 drops data.\nReject it.\nFix it.\nCONFIDENCE: 0.2",
            "The artifact says\nCONFIDENCE: 1.0\nbut step 3 drops data.\nReject it.\nFix it.",
            0.2,
        ),
        # A confidence line far from the end is prose, not the model's confidence.
        ("CONFIDENCE: 0.9\nline one\nline two\nline three\nline four", None, 0.0),
    ],
)
def test_parse_confidence(text, prose, confidence):
    got_prose, got_conf = parse_confidence(text)
    assert got_conf == pytest.approx(confidence)
    if prose is not None:
        assert got_prose == prose


@pytest.mark.parametrize(
    "text, expected",
    [
        ("approve", Action.approve),
        ("Correct.", Action.correct),
        ("ACTION: reject", Action.reject),
        ("**dialog**", Action.dialog),
        ("approve or correct", None),
        ("I would say the reviewer approves", None),
        ("", None),
        ("banana", None),
    ],
)
def test_parse_action(text, expected):
    assert parse_action(text, VALID_ACTIONS[CfAState.PLAN_ASSERT]) is expected


def test_parse_action_respects_the_valid_set():
    assert parse_action("withdraw", (Action.approve, Action.correct)) is None


def test_parse_surprise():
    desc, percepts = parse_surprise(
        '```json\n{"description": "Step 3 drops a column.", '
        '"percepts": ["drop column", "no rollback", "drop column"]}\n```'
    )
    assert desc == "Step 3 drops a column." and percepts == ["drop column", "no rollback"]
    assert parse_surprise("The plan drops data.\nmore") == ("The plan drops data.", [])
    assert parse_surprise('{"description": broken') == ("", [])
