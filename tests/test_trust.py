"""The trust ledger of upstream agents: regret inferred on a lineage, counted against the
autonomy rule and the agent's trust, and shown by `vicar health`."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.memory.principal import PrincipalMemory
from vicar.memory.store import MIGRATIONS, RecordStore
from vicar.models import AnsweredBy, GateRequest, PassResult
from vicar.proxy.autonomy.ledger import Evidence, autonomy_pairs
from vicar.proxy.outcome_log import OutcomeEntry, ledger_rows, log_outcome, regrets
from vicar.proxy.trust import INITIAL_TRUST, ledger
from vicar.settings import CalibrationParams, MemoryParams, PredictorParams

from .conftest import record_answer, rule_for


def patch(i: int, version: int, series: str = "lm75: add TMP75B", agent: str = "patch-bot") -> GateRequest:
    return GateRequest(
        principal="alice",
        gate_id=f"g{i}",
        state="WORK_ASSERT",
        task_type="hwmon",
        question="Approve or revise this patch",
        title=f"[PATCH v{version}] hwmon: {series}",
        artifact_text=f"{series}, revision {version}",
        upstream_agent=agent,
    )


def answer(
    mem: PrincipalMemory,
    i: int,
    req: GateRequest,
    action: str,
    by=AnsweredBy.human,
    score: float = 0.9,
    predicted: str = "approve",
    window: int = 100,
) -> None:
    record_answer(
        mem,
        req,
        i,
        action,
        f"[{action}]",
        by=by.value,
        score=score,
        predicted=predicted,
        params=CalibrationParams(regret_window=window),
    )


def test_regret_is_inferred_from_a_later_correction_on_the_same_lineage(memory):
    answer(memory, 1, patch(1, 1), "approve")  # the human: a right pair at 0.9
    answer(memory, 2, patch(2, 2), "approve", by=AnsweredBy.proxy, score=0.93)  # the proxy alone
    answer(memory, 3, patch(3, 1, series="pmbus: new driver"), "approve", by=AnsweredBy.proxy)  # another thread
    before = rule_for(memory, patch(9, 9), CalibrationParams())
    # The human corrects the next revision of the same series: the proxy's approval of v2
    # was wrong. The other thread's approval is not touched.
    answer(memory, 4, patch(4, 3), "correct", predicted="correct")
    proxy_v2 = memory.store.proxy_answers_on(
        "gate",
        memory.store.get_chunks([r[0] for r in memory.store._db.execute("SELECT id FROM chunks WHERE created_n = 2")])[
            0
        ].lineage,
        0,
        10,
    )
    assert [(c.created_n, c.outcome) for c in proxy_v2] == [(2, "approve")]
    assert [(cid, agent) for cid, agent, _ in regrets(memory.store)] == [(proxy_v2[0].id, "patch-bot")]
    # The regret is a wrong pair at the proxy's own score, arriving now: the window built
    # before it sees it on its next read.
    pairs = autonomy_pairs(memory.store, "gate")
    assert [(s, ok) for _, s, ok in pairs] == [(0.9, True), (0.9, True), (0.93, False)]
    after = rule_for(memory, patch(9, 9), CalibrationParams())
    assert (before.evidence, before.errors) == (1, 0) and (after.evidence, after.errors) == (3, 1)
    # Found once: a rejection of the same thread later does not regret it again.
    answer(memory, 5, patch(5, 4), "reject", predicted="reject")
    assert len(regrets(memory.store)) == 1

    [bot] = ledger(*ledger_rows(memory.store))
    assert (bot.agent, bot.approvals, bot.corrections, bot.rejections) == ("patch-bot", 1, 1, 1)
    assert (bot.alone, bot.approved_alone, bot.regrets, bot.overrides) == (2, 2, 1, 0)
    assert bot.regret_ratio == 0.5 and bot.score == pytest.approx((1 + 3) / (3 + 5) * 0.5)


def test_no_regret_outside_the_window_or_when_switched_off(memory):
    answer(memory, 1, patch(1, 1), "approve", by=AnsweredBy.proxy)
    answer(memory, 50, patch(50, 2), "correct", window=40)  # 49 interactions later
    answer(memory, 51, patch(51, 3), "correct", window=0)
    assert regrets(memory.store) == []
    answer(memory, 52, patch(52, 4), "correct", window=60)
    assert len(regrets(memory.store)) == 1


def test_overrides_and_a_new_agents_trust(memory):
    answer(memory, 1, patch(1, 1, agent="a"), "correct")  # the proxy would have approved: an override
    answer(memory, 2, patch(2, 1, series="other", agent="a"), "approve")
    [a] = ledger(*ledger_rows(memory.store))
    assert (a.overrides, a.regrets, a.human_answers) == (1, 0, 2)
    assert ledger([], []) == []
    from vicar.proxy.trust import AgentTrust

    assert AgentTrust(agent="new").score == INITIAL_TRUST


def test_health_shows_the_ledger(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    mem = PrincipalMemory("alice", tmp_path / "principals", embedder, MemoryParams())
    try:
        answer(mem, 1, patch(1, 1), "approve")
        answer(mem, 2, patch(2, 2), "approve", by=AnsweredBy.proxy)
        answer(mem, 3, patch(3, 3), "reject", predicted="reject")
    finally:
        mem.close()
    result = CliRunner().invoke(app, ["health", "alice"], terminal_width=220)
    assert result.exit_code == 0, result.output
    assert "Trust ledger" in result.output
    row = next(line for line in result.output.splitlines() if "patch-bot" in line)
    # approved, corrected, rejected, other, alone, overrides, regret, trust
    cells = [c.strip() for c in row.strip("│┃| ").split("│")]
    assert cells[1:] == ["1", "0", "1", "0", "1", "0", "1", f"{(1 + 3) / (2 + 5) * 0.0:.2f}"]


def test_pairs_from_before_regret_keep_their_order(tmp_path):
    """A store from the previous schema: its pairs move to the new table in order, and a
    new pair comes after them."""
    mine = next(i for i, m in enumerate(MIGRATIONS) if "autonomy_pairs_v2" in m)
    path = tmp_path / "memory.db"
    db = sqlite3.connect(path)
    for m in MIGRATIONS[:mine]:
        db.executescript(m)
    db.executescript(
        "INSERT INTO autonomy_pairs VALUES (3, 'gate', 'S', 't', 3, 0.7, 1), (7, 'gate', 'S', 't', 7, 0.4, 0);"
        f"PRAGMA user_version = {mine};"
    )
    db.close()
    store = RecordStore(path)
    try:
        assert autonomy_pairs(store, "gate") == [(3, 0.7, True), (7, 0.4, False)]
        log_outcome(
            store,
            OutcomeEntry(
                "w/8",
                "S",
                "t",
                "human",
                "approve",
                None,
                "{}",
                "k",
                lambda e: "{}",
                evidence=Evidence("gate", 8, 0.6, True, None),
            ),
        )
        assert [s for _, s, _ in autonomy_pairs(store, "gate", after_seq=7)] == [0.6]
    finally:
        store.close()


def test_an_untrusted_agent_is_probed_and_never_answered_alone(memory):
    from vicar.llm import prompts
    from vicar.models import AutonomyRule, CalibrationInputs
    from vicar.proxy.calibration import calibrate
    from vicar.proxy.learned import LearnedPredictor
    from vicar.proxy.learned_history import memory_features
    from vicar.proxy.retrieval import retrieve

    for i in range(1, 7):  # six of its patches corrected: approval (0 + 3) / (6 + 5) = 0.27
        answer(memory, i, patch(i, 1, series=f"series {i}", agent="sloppy-bot"), "correct", predicted="correct")
    answer(memory, 7, patch(7, 1, series="good", agent="good-bot"), "approve")
    req = patch(8, 1, series="next", agent="sloppy-bot")
    ctx = retrieve(memory, req, 8, "posterior", req.artifact_text, params=CalibrationParams())
    assert ctx.agent_trust == pytest.approx(3 / 11) and ctx.untrusted
    good = retrieve(memory, patch(9, 1, agent="good-bot"), 9, "prior", params=CalibrationParams())
    assert good.agent_trust == pytest.approx(4 / 6) and not good.untrusted
    # Switched on, the learned model reads the score as a feature (the one place regret
    # reaches it); without an agent, or switched off (the default), the feature is
    # missing, not a made-up value.
    vote = PassResult(prose="", confidence=0.0)
    assert memory_features(vote, ctx, trust=True)["agent_trust"] == pytest.approx(3 / 11)
    assert "agent_trust" not in memory_features(vote, ctx)
    switched = LearnedPredictor(PredictorParams(trust_feature=True)).prior(req, ctx, [])
    assert switched.features["agent_trust"] == pytest.approx(3 / 11)
    assert "agent_trust" not in LearnedPredictor().prior(req, ctx, []).features
    anonymous = retrieve(memory, patch(9, 1, agent=""), 9, "prior", params=CalibrationParams())
    assert anonymous.agent_trust is None and "agent_trust" not in memory_features(vote, anonymous, trust=True)
    # The posterior takes the prior's score rather than reading the ledger again.
    passed = retrieve(memory, req, 8, "posterior", req.artifact_text, params=CalibrationParams(), agent_trust=0.1)
    assert passed.agent_trust == 0.1 and passed.untrusted
    # Probed at a plan gate as at an intent gate ...
    assert prompts.PROBE_UNTRUSTED in prompts.pass_body(req, [], [], untrusted=True)
    assert prompts.PROBE_UNTRUSTED not in prompts.pass_body(req, [], [])
    # ... and never answered alone, even on a proven score.
    rule = AutonomyRule(threshold=0.5, bound=0.01, evidence=100, errors=0, target=0.05, delta=0.05, audit_share=0.0)
    inputs = CalibrationInputs(rule=rule, agent="sloppy-bot", agent_human_answers=6, agent_trust=ctx.agent_trust)
    cal = calibrate(0.9, inputs, CalibrationParams())
    assert cal.guard == "untrusted" and not cal.autonomous and "trust 0.27 < floor 0.3" in cal.note
    assert calibrate(0.9, inputs, CalibrationParams(trust_floor=0.0)).autonomous


def test_the_mechanisms_are_switched_by_the_evaluation_profile(tmp_path):
    from pydantic import ValidationError

    from vicar.eval.profile import EvalProfile
    from vicar.settings import Settings

    shipped = Settings(data_dir=tmp_path)
    profile = EvalProfile(regret_window=100, censor_min=3, preferences=False, storage=True, trust_feature=True)
    s = profile.apply(shipped)
    assert (
        s.calibration.regret_window,
        s.calibration.censor_min,
        s.facts.preferences,
        s.memory.storage,
        s.predictor.trust_feature,
    ) == (100, 3, False, True, True)
    # Nothing else moves, and the shipped settings are left as they were.
    assert s.calibration.trust_floor == shipped.calibration.trust_floor and s.facts.procedures
    sections = profile.SECTION.items()
    assert EvalProfile.shipped() == {name: getattr(getattr(shipped, section), name) for name, section in sections}
    assert (shipped.calibration.regret_window, shipped.memory.storage) == (0, False)
    # The product's own bounds hold.
    with pytest.raises(ValidationError, match="trust_floor"):
        EvalProfile(trust_floor=2).apply(shipped)
