"""The predictor's optional abilities are declared on its protocol, and each predictor
states the ones it has: callers use plain attribute access, never probe by name."""

from __future__ import annotations

import re
from pathlib import Path

from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.learned_store import LearnedModels
from vicar.proxy.llm_predictor import LLMPredictor
from vicar.proxy.offline import OfflinePredictor
from vicar.proxy.provider import Predictor

ABILITIES = ("using", "pin", "refit", "forget", "observe", "judge_conflict", "extract_preferences")
ROOT = Path(__file__).resolve().parent.parent


def _has(cls: type) -> set[str]:
    return {a for a in ABILITIES if getattr(cls, a) is not None}


def test_protocol_declares_each_ability_absent_by_default():
    assert _has(Predictor) == set()
    assert Predictor.local is False


def test_each_predictor_states_its_abilities():
    assert _has(OfflinePredictor) == set()
    assert _has(LearnedPredictor) == {"observe"}
    assert _has(LearnedModels) == {"using", "pin", "refit", "forget"}
    assert _has(LLMPredictor) == {"judge_conflict", "extract_preferences"}
    assert (OfflinePredictor.local, LearnedPredictor.local, LearnedModels.local, LLMPredictor.local) == (
        True,
        True,
        True,
        False,
    )
    # The learned predictor's own refit switch is not the refit ability.
    assert LearnedPredictor(auto_refit=False).refit is None


def test_no_caller_probes_a_predictor_by_name():
    probe = re.compile(r"(getattr|hasattr)\([^,()]*predictor[^,()]*,")
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for d in ("vicar", "activities", "workflows", "memory", "bench")
        for p in sorted((ROOT / d).rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if probe.search(line)
    ]
    assert found == []
