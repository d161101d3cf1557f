"""The autonomy rule: the Clopper-Pearson bound against an independent computation, the
threshold search on hand-made pairs, its evidence in the store (written once per gate,
only by human answers) and its per-principal, per-state parameters."""

from __future__ import annotations

import math

import pytest

from vicar.config import AUTONOMY_FILE, AutonomyParams, CalibrationParams, MemoryParams, Settings, autonomy_params
from vicar.errors import InvalidInput
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.autonomy import PairWindow, find_threshold, upper_bound
from vicar.proxy.consult import autonomy_rule
from vicar.proxy.ledger import autonomy_pairs, labelled_pairs
from vicar.proxy.outcomes import record_outcome


def binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def bisect_bound(k: int, n: int, delta: float) -> float:
    """The p at which P(Bin(n, p) <= k) = delta, by bisection (the CDF falls as p grows)."""
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if binom_cdf(k, n, mid) > delta:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def test_the_bound_against_known_values_and_a_bisection():
    # 0 errors: the bound is 1 - delta^(1/n); 59 answers prove 5%, 58 do not.
    assert upper_bound(0, 59, 0.05) == pytest.approx(0.0495, abs=5e-5) and upper_bound(0, 59, 0.05) < 0.05
    assert upper_bound(0, 58, 0.05) > 0.05
    assert upper_bound(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10), rel=1e-9)
    for k, n, delta in [(0, 1, 0.05), (1, 12, 0.05), (3, 40, 0.05), (12, 612, 0.05), (5, 20, 0.1), (9, 10, 0.01)]:
        assert upper_bound(k, n, delta) == pytest.approx(bisect_bound(k, n, delta), abs=1e-9), (k, n, delta)
    # The edges: no evidence, or every answer wrong, prove nothing below 1.
    assert upper_bound(0, 0, 0.05) == 1.0 and upper_bound(7, 7, 0.05) == 1.0


def test_threshold_search_on_hand_made_pairs():
    # 59 right answers at 0.9 prove 5%; 58 do not.
    rule = find_threshold([0.9] * 59, [True] * 59, 0.05, 0.05)
    assert (rule.threshold, rule.evidence, rule.errors) == (0.9, 59, 0) and rule.bound < 0.05
    rule = find_threshold([0.9] * 58, [True] * 58, 0.05, 0.05)
    assert rule.threshold is None and rule.evidence == 58 and rule.bound > 0.05
    # Target 0.25: 11 right answers are enough (1 - 0.05^(1/11) = 0.238), 10 are not.
    assert find_threshold([0.99] * 11, [True] * 11, 0.25, 0.05).threshold == 0.99
    assert find_threshold([0.99] * 10, [True] * 10, 0.25, 0.05).threshold is None
    # The lowest proven threshold: below 0.6 the errors come in, so t stays at 0.6.
    scores = [0.95] * 6 + [0.8] * 5 + [0.6] * 3 + [0.4, 0.3, 0.2]
    right = [True] * 14 + [False, False, False]
    rule = find_threshold(scores, right, 0.25, 0.05)
    assert (rule.threshold, rule.evidence, rule.errors) == (0.6, 14, 0)
    assert rule.bound == pytest.approx(bisect_bound(0, 14, 0.05), abs=1e-9)
    # Ties go in together: a wrong answer at the threshold's own score counts.
    rule = find_threshold([0.9] * 12 + [0.7, 0.7], [True] * 12 + [True, False], 0.25, 0.05)
    assert (rule.threshold, rule.evidence) == (0.9, 12)
    # One error among many can still be within the target: the bound is not "no errors".
    rule = find_threshold([0.9] * 40, [True] * 39 + [False], 0.25, 0.05)
    assert (rule.threshold, rule.errors) == (0.9, 1)
    # Nothing proven: the bound over all the evidence is reported.
    rule = find_threshold([0.9, 0.8, 0.7], [True, False, True], 0.05, 0.05)
    assert (rule.threshold, rule.evidence, rule.errors) == (None, 3, 1)
    assert rule.bound == pytest.approx(bisect_bound(1, 3, 0.05), abs=1e-9)
    assert find_threshold([], [], 0.05, 0.05).threshold is None


def test_the_search_stops_at_the_first_failing_threshold():
    # Learn-then-Test: a failing threshold ends the sequence, even though a lower one
    # would pass on more pairs (the rule before took the lowest passing one, 0.5, with no
    # correction for the thresholds it tried).
    scores = [0.95] * 20 + [0.9] * 3 + [0.5] * 60
    right = [True] * 20 + [False] * 3 + [True] * 60
    assert find_threshold(scores, right, 0.25, 0.05).threshold == 0.95
    # Thresholds with too few pairs to ever pass are not tested: the sequence starts
    # where a pass is possible (20 pairs here; 10 cannot prove 25%).
    assert find_threshold([0.99] * 10 + [0.9] * 10, [True] * 20, 0.25, 0.05).threshold == 0.9


def test_threshold_search_agrees_with_brute_force():
    import random

    from scipy import stats

    rng = random.Random(7)
    for trial in range(40):
        size = rng.randint(1, 120)
        scores = [round(rng.random(), 1) for _ in range(size)]  # coarse: many ties
        right = [rng.random() < 0.9 for _ in range(size)]
        target, delta = rng.choice([0.05, 0.1, 0.25, 0.5]), rng.choice([0.05, 0.2])
        # Fixed-sequence: from the highest threshold with enough pairs that 0 errors would
        # pass, down, stopping at the first that fails.
        fewest = next(n for n in range(1, 10_000) if bisect_bound(0, n, delta) <= target)
        reached = None
        for t in sorted(set(scores), reverse=True):
            n = sum(s >= t for s in scores)
            if n < fewest and reached is None:
                continue
            if bisect_bound(sum(s >= t and not ok for s, ok in zip(scores, right)), n, delta) > target:
                break
            reached = t
        rule = find_threshold(scores, right, target, delta)
        assert rule.threshold == reached, (trial, target, delta)
        if rule.threshold is not None:
            k = sum(s >= rule.threshold and not ok for s, ok in zip(scores, right))
            assert (rule.evidence, rule.errors) == (sum(s >= rule.threshold for s in scores), k)
            assert rule.bound == pytest.approx(stats.beta.ppf(1 - delta, k + 1, rule.evidence - k), abs=1e-9)


def test_the_window_keeps_the_latest_pairs_and_caches_its_rule():
    w = PairWindow(12)
    w.extend([(i, 0.1, False) for i in range(1, 6)])  # old errors, soon out of the window
    assert w.rule(0.25, 0.05, 0.0).threshold is None
    w.extend([(i, 0.9, True) for i in range(6, 18)])
    rule = w.rule(0.25, 0.05, 0.0)
    assert w.last_seq == 17 and (rule.threshold, rule.evidence, rule.errors) == (0.9, 12, 0)
    assert w.rule(0.25, 0.05, 0.0) is rule  # nothing new: not searched again
    w.extend([(18, 0.95, False)])
    assert w.rule(0.25, 0.05, 0.0) is not rule
    # Kept sorted as pairs come and go, one by one or in batches: the same rule as a
    # fresh search over the latest pairs.
    import random

    rng = random.Random(3)
    w, seen = PairWindow(50), []
    for seq in range(1, 400):
        batch = [(seq * 100 + j, round(rng.random(), 1), rng.random() < 0.9) for j in range(rng.choice([1, 1, 1, 12]))]
        w.extend(batch)
        seen += batch
        latest = seen[-50:]
        assert w.rule(0.1, 0.05, 0.0) == find_threshold([x for _, x, _ in latest], [o for _, _, o in latest], 0.1, 0.05)


def gate(p: str, gid: str, state: str = "PLAN_ASSERT", kind: str = "gate") -> GateRequest:
    return GateRequest(
        principal=p,
        gate_id=gid,
        state=state,
        task_type="docs",
        kind=kind,
        question="Approve or revise the plan.",
        artifact_text="Fix a typo.",
    )


def outcome(
    p: str,
    i: int,
    action: str,
    predicted: str | None,
    score: float,
    by=AnsweredBy.human,
    guard: str = "unproven",
    kind: str = "gate",
) -> OutcomeRecord:
    post = PassResult(
        prose="ok" if predicted else "", confidence=score, action=Action(predicted) if predicted else None
    )
    return OutcomeRecord(
        request=gate(p, f"g{i}", kind=kind),
        n=i,
        workflow_id=f"vicar-gate/g{i}",
        action=Action(action),
        response_text="ok",
        answered_by=by,
        prior=post,
        posterior=post,
        calibration=Calibration(confidence=score, guard=guard),
    )


def test_pairs_come_from_human_answers_once_per_gate(tmp_path, embedder):
    p = "alice"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        record_outcome(memory, outcome(p, 1, "approve", "approve", 0.9), artifacts=False)
        record_outcome(memory, outcome(p, 1, "approve", "approve", 0.9), artifacts=False)  # a retried activity
        record_outcome(memory, outcome(p, 2, "reject", "approve", 0.8), artifacts=False)
        record_outcome(memory, outcome(p, 3, "approve", None, 0.0), artifacts=False)  # no prediction: wrong
        record_outcome(memory, outcome(p, 4, "approve", "approve", 0.99, by=AnsweredBy.proxy), artifacts=False)
        record_outcome(memory, outcome(p, 5, "approve", None, 0.0, guard="proxy_error"), artifacts=False)
        record_outcome(memory, outcome(p, 6, "answer", "answer", 0.7, kind="question"), artifacts=False)
        store = memory.store
        assert [(s, ok) for _, s, ok in autonomy_pairs(store, "gate")] == [(0.9, True), (0.8, False), (0.0, False)]
        assert [(s, ok) for _, s, ok in autonomy_pairs(store, "question")] == [(0.7, True)]
        assert [s for _, s, _ in autonomy_pairs(store, "gate", limit=2)] == [0.8, 0.0]  # the newest, in order
        rows = store._db.execute(
            "SELECT outcome_seq, kind, state, task_type, n FROM autonomy_pairs ORDER BY seq"
        ).fetchall()
        assert [r[4] for r in rows] == [1, 2, 3, 6]
        assert all(store.outcome_seq(f"vicar-gate/g{r[4]}") == r[0] for r in rows)  # from the outcome
        assert rows[0][1:4] == ("gate", "PLAN_ASSERT", "docs")
    finally:
        memory.close()


def test_parameters_per_principal_and_state(tmp_path, embedder):
    base = AutonomyParams()
    d = tmp_path / "bob"
    d.mkdir()
    assert autonomy_params(base, d, "PLAN_ASSERT") == base  # no file: the defaults
    (d / AUTONOMY_FILE).write_text(
        '{"target_error": 0.25, "audit_share": 0.5, "states": {"WORK_ASSERT": {"target_error": 0.1, "window": 50}}}'
    )
    plan = autonomy_params(base, d, "PLAN_ASSERT")
    assert (plan.target_error, plan.audit_share, plan.window, plan.delta) == (0.25, 0.5, 2000, 0.05)
    work = autonomy_params(base, d, "WORK_ASSERT")
    assert (work.target_error, work.audit_share, work.window) == (0.1, 0.5, 50)
    for bad, why in [
        ('{"target_error": 2}', "target_error"),
        ('{"target": 0.1}', "target"),
        ('{"states": {"X": {"audit_share": -1}}}', "states.X.audit_share"),
        ("{", "file"),
    ]:
        (d / AUTONOMY_FILE).write_text(bad)
        with pytest.raises(InvalidInput, match=f"not a valid autonomy file: {why}"):
            autonomy_params(base, d, "PLAN_ASSERT")
    # Through the consult path: 21 right answers prove 0.25 for this principal (the betting
    # rule, valid whenever read: 20 do not), not the default 5%.
    (d / AUTONOMY_FILE).write_text('{"target_error": 0.25}')
    memory = PrincipalMemory("bob", tmp_path, embedder, MemoryParams())
    try:
        for i in range(1, 21):
            record_outcome(memory, outcome("bob", i, "approve", "approve", 0.99), artifacts=False)
        assert autonomy_rule(memory, gate("bob", "next"), CalibrationParams()).threshold is None
        record_outcome(memory, outcome("bob", 21, "approve", "approve", 0.99), artifacts=False)
        rule = autonomy_rule(memory, gate("bob", "next"), CalibrationParams())
        assert (rule.threshold, rule.evidence, rule.target) == (0.99, 21, 0.25)
        (d / AUTONOMY_FILE).unlink()
        rule = autonomy_rule(memory, gate("bob", "next"), CalibrationParams())
        assert (rule.threshold, rule.target) == (None, 0.05)
    finally:
        memory.close()


def test_environment_defaults(monkeypatch):
    monkeypatch.setenv("VICAR_AUTONOMY_TARGET_ERROR", "0.1")
    monkeypatch.setenv("VICAR_AUTONOMY_WINDOW", "500")
    p = Settings.from_env().calibration.autonomy
    assert (p.target_error, p.window, p.delta, p.audit_share) == (0.1, 500, 0.05, 0.05)
    monkeypatch.setenv("VICAR_AUTONOMY_AUDIT_SHARE", "1.5")
    with pytest.raises(InvalidInput, match="VICAR_AUTONOMY_AUDIT_SHARE"):
        Settings.from_env()


def test_an_audited_pair_keeps_its_audit_probability(tmp_path, embedder):
    p = "carol"
    memory = PrincipalMemory(p, tmp_path, embedder, MemoryParams())
    try:
        audited = outcome(p, 1, "approve", "approve", 0.97, guard="audit")
        audited.calibration.audit_share = 0.05
        record_outcome(memory, audited, artifacts=False)
        record_outcome(memory, outcome(p, 2, "reject", "approve", 0.4), artifacts=False)  # escalated: no weight
        pairs = labelled_pairs(memory.store, "gate")
        assert [(x.score, x.correct, x.audit_p) for x in pairs] == [(0.97, True, 0.05), (0.4, False, None)]
        assert (pairs[0].state, pairs[0].task_type) == ("PLAN_ASSERT", "docs")
        assert [x.seq for x in labelled_pairs(memory.store, "gate", after_seq=pairs[0].seq)] == [pairs[1].seq]
    finally:
        memory.close()
