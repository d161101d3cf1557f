"""Replay evaluation: metrics against hand-computed values, the replay on real data."""

from __future__ import annotations

import gzip
import itertools
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vicar.cli import app
from vicar.errors import VicarError
from vicar.eval import metrics as m
from vicar.eval.dataset import load_events, principal_for
from vicar.eval.replay import Variant, event_texts, replay_reviewer
from vicar.settings import Settings


def _dataset_dir() -> Path | None:
    """shared/ lies beside the checkout (here and in CI); VICAR_GATE_REPLAY_DIR overrides."""
    if os.environ.get("VICAR_GATE_REPLAY_DIR"):
        return Path(os.environ["VICAR_GATE_REPLAY_DIR"])
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "datasets" / "gate-replay" / "dev"
        if candidate.is_dir():
            return candidate
    return None


DATA = _dataset_dir()


def P(actual, predicted, conf, autonomous=None, **kw):
    return m.Prediction(
        seq=0,
        actual=actual,
        predicted=predicted,
        confidence=conf,
        autonomous=conf >= 0.8 if autonomous is None else autonomous,
        **kw,
    )


# A tiny synthetic history, scored by hand below.
HISTORY = [
    P("approve", "approve", 0.9),  # right, alone
    P("approve", "approve", 0.7),  # right, escalated
    P("correct", "approve", 0.85),  # wrong, alone
    P("correct", "correct", 0.6),  # right
    P("reject", None, 0.0),  # no prediction
]


def test_metrics_match_hand_computed_values():
    assert m.accuracy(HISTORY) == pytest.approx(3 / 5)
    f1 = m.per_class_f1(HISTORY)
    # approve: tp 2, fp 1, fn 0 -> 4/5; correct: tp 1, fp 0, fn 1 -> 2/3; reject: tp 0, fn 1 -> 0; hold: none
    assert f1 == {"approve": pytest.approx(0.8), "correct": pytest.approx(2 / 3), "reject": 0.0, "hold": None}
    assert m.macro_f1(HISTORY) == pytest.approx((0.8 + 2 / 3 + 0) / 3)
    # Brier: (0.9-1)^2 + (0.7-1)^2 + (0.85-0)^2 + (0.6-1)^2 + (0-0)^2 = 0.01+0.09+0.7225+0.16 = 0.9825
    assert m.brier(HISTORY) == pytest.approx(0.9825 / 5)
    # ECE, 10 bins: [0,.1): conf 0 acc 0 -> 0; [.6,.7): .6 vs 1 -> .4; [.7,.8): .7 vs 1 -> .3;
    # [.8,.9): .85 vs 0 -> .85; [.9,1]: .9 vs 1 -> .1; each bin holds 1 of 5.
    assert m.ece(HISTORY) == pytest.approx((0 + 0.4 + 0.3 + 0.85 + 0.1) / 5)
    a = m.autonomy(HISTORY)
    assert a.share == pytest.approx(2 / 5) and a.error == pytest.approx(1 / 2)
    # Only the 0.9 gate alone is error-free: 1/5 is the most autonomy with error <= 5%.
    assert a.best_share == pytest.approx(1 / 5) and a.best_threshold == pytest.approx(0.9)


def test_bound_coverage_and_autonomy_against_history():
    def alone(ok: bool):
        return P("approve", "approve" if ok else "reject", 0.9, autonomous=True)

    history = [
        alone(True),
        P("approve", None, 0.0, autonomous=False),
        alone(True),
        alone(False),
        alone(True),
        alone(True),
        alone(True),
    ]
    # Autonomous answers wrong? 0 0 1 0 0 0 -> windows of 3: 1/3, 1/3, 1/3, 0.
    assert m.bound_coverage([history], target=0.34, window=3) == (1.0, 4)
    assert m.bound_coverage([history], target=0.3, window=3) == (0.25, 4)
    # Fewer autonomous answers than a window: one window of all of them, per reviewer.
    short = [alone(False), alone(True)]
    assert m.bound_coverage([history, short], target=0.3, window=3) == (1 / 5, 5)
    assert m.bound_coverage([[P("approve", None, 0.0, autonomous=False)]]) == (None, 0)
    by = m.autonomy_by_history([history, short], window=4)
    assert [(w["start"], w["gates"]) for w in by] == [(0, 6), (4, 3)]
    assert by[0]["share"] == pytest.approx(5 / 6) and by[0]["error"] == pytest.approx(2 / 5)
    assert by[1]["share"] == 1.0 and by[1]["error"] == 0.0
    a = m.autonomy(history + short, groups=[history, short], target=0.3)
    # 500-answer windows: one per reviewer, of all its answers: 1/6 within 0.3, 1/2 not.
    assert a.coverage_windows == 2 and a.coverage == 0.5
    assert [w["gates"] for w in a.by_history] == [9]


def test_the_replay_earns_autonomy_online_by_the_rule(tmp_path, embedder):
    from vicar.settings import AutonomyParams, CalibrationParams

    events = load_events([synthetic_file(tmp_path / "tiny.jsonl.gz", n=24)])["Ada Tester"]
    loose = CalibrationParams(autonomy=AutonomyParams(target_error=0.5, audit_share=0.0))
    preds = replay_reviewer(events, Variant(name="default"), embedder, Settings(data_dir=tmp_path, calibration=loose))
    first = next(i for i, p in enumerate(preds) if p.autonomous)
    # Five right predictions among the human-answered gates before it prove 0.5
    # (1 - 0.05^(1/5) = 0.451; four give 0.527).
    assert sum(p.correct and p.predicted is not None for p in preds[:first]) >= 5
    assert sum(p.autonomous for p in preds) >= 5 and all(p.correct for p in preds if p.autonomous)
    # The default rule (5%) proves nothing in 24 gates: every gate goes to the human.
    strict = replay_reviewer(events, Variant(name="default"), embedder, Settings(data_dir=tmp_path))
    assert not any(p.autonomous for p in strict)


def test_concerns_surprise_and_learning_curve():
    preds = [
        P(
            "correct",
            "correct",
            0.5,
            predicted_text="What is the rollback plan?",
            actual_text="Please add a rollback step and a test.",
            surprise=True,
            prior_confidence=0.9,
            surprise_percepts=["rollback"],
        ),
        P(
            "approve",
            "correct",
            0.2,
            predicted_text="Needs tests.",
            actual_text="Fine.",
            surprise=True,
            prior_confidence=0.6,
            surprise_percepts=["regmap"],
        ),
    ]
    assert m.concerns_in("uses regmap", themes=["regmap"]) == {"theme:regmap"}
    s = m.surprise_calibration(preds)
    # 1st: confidence fell, prediction right -> not confirmed; 2nd: fell and wrong -> confirmed.
    assert s.surprises == 2 and s.confirmed == pytest.approx(0.5) and s.percepts_in_response == pytest.approx(0.5)
    curve = m.learning_curve(HISTORY, windows=5)
    assert [c["accuracy"] for c in curve] == [1.0, 1.0, 0.0, 1.0, 0.0]


@pytest.fixture(scope="module")
def herring():
    if DATA is None:
        pytest.fail(
            "the gate-replay dataset (shared/datasets/gate-replay/dev) is not beside the checkout; "
            "set VICAR_GATE_REPLAY_DIR"
        )
    events = load_events([DATA / "lkml-hwmon.jsonl.gz"])
    return events["Rob Herring"]


def test_replay_never_sees_the_future(herring, embedder, tmp_path):
    settings = Settings(data_dir=tmp_path)
    variant = Variant(name="default")
    short = replay_reviewer(herring[:25], variant, embedder, settings)
    longer = replay_reviewer(herring[:40], variant, embedder, settings)
    assert len(short) == 25 and len(longer) == 40
    # The first 25 predictions cannot depend on what came after them.
    assert [p.model_dump() for p in longer[:25]] == [p.model_dump() for p in short]
    assert short[0].predicted is None and short[0].confidence == 0.0  # a fresh memory knows nothing
    assert [p.actual for p in short] == [e.action.value for e in herring[:25]]
    assert any(p.predicted is not None for p in longer)


def test_a_replay_seed_gives_the_same_gates_other_draws(herring, embedder, tmp_path):
    settings = Settings(data_dir=tmp_path)
    seen: list[str] = []
    base = replay_reviewer(herring[:40], Variant(name="default"), embedder, settings)
    again = replay_reviewer(herring[:40], Variant(name="default"), embedder, settings)
    other = replay_reviewer(
        herring[:40],
        Variant(name="default", seed=3),
        embedder,
        settings,
        inspect=lambda memory: seen.append(memory.principal),
    )
    assert [p.model_dump() for p in again] == [p.model_dump() for p in base]  # a seed is a fixed draw
    assert seen == ["rob-herring-seed3"]
    assert [p.actual for p in other] == [p.actual for p in base]  # the same gates ...
    assert [p.confidence for p in other] != [p.confidence for p in base]  # ... other noise
    assert len(principal_for("x" * 80, seed=12)) == 64 and principal_for("x" * 80).endswith("x")


class _Recording:
    """The real embedder, noting every text it is asked for."""

    def __init__(self, embedder) -> None:
        self.inner = embedder
        self.asked: list[str] = []
        self.model_name, self.dim = embedder.model_name, embedder.dim

    def embed(self, texts):
        self.asked.extend(texts)
        return self.inner.embed(texts)


def test_the_warm_cache_holds_what_the_replay_embeds(herring, embedder, tmp_path):
    """event_texts (the batched warm-up) must be exactly what the consult path and the
    store ask for; otherwise a full replay embeds one text at a time. Both sources:
    git artifacts end in a newline that the stored excerpt drops."""
    junio = load_events([DATA / "git-whats-cooking.jsonl.gz"])["Junio C Hamano"]
    events = herring[:20] + junio[:20]
    warm = set(event_texts(events))
    recording = _Recording(embedder)
    preds = replay_reviewer(events, Variant(name="default"), recording, Settings(data_dir=tmp_path))
    asked = set(recording.asked)
    assert len(asked & warm) > 2 * len(events)
    # Only what depends on the proxy's own output is new: its surprise descriptions
    # (and the blended text that includes them) and the words it answered alone with.
    alone = {p.predicted_text for p in preds if p.autonomous}
    missed = [t for t in asked - warm if not any(a and a in t for a in alone)]
    assert all("The artifact " in t for t in missed), missed[:3]


def test_baselines(herring, embedder, tmp_path):
    settings = Settings(data_dir=tmp_path)
    maj = replay_reviewer(herring[:30], Variant(name="majority", kind="majority"), embedder, settings)
    counts = {}
    for i, e in enumerate(herring[:30]):
        if i:
            top = max(counts.values())
            assert maj[i].confidence == pytest.approx(top / i)
        counts[e.action.value] = counts.get(e.action.value, 0) + 1
    ema = replay_reviewer(herring[:30], Variant(name="ema", kind="ema"), embedder, settings)
    assert all(p.autonomous == (p.predicted == "approve" and p.confidence >= 0.8) for p in ema)


def synthetic_file(path: Path, n: int = 12) -> Path:
    rows = []
    for i, (tt, action) in zip(range(n), itertools.cycle([("docs", "approve"), ("pmbus", "correct")])):
        rows.append(
            {
                "reviewer": "Ada Tester",
                "seq": i,
                "gate_id": f"t:{i}",
                "state": "WORK_ASSERT",
                "task_type": tt,
                "artifact_title": f"change {i}",
                "artifact_text": f"[PATCH] {tt}: change {i}",
                "question": f"Approve or revise this patch: change {i}",
                "action": action,
                "response": "Applied." if action == "approve" else "Please fix the error path.",
                "source": "synthetic",
            }
        )
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_cli_writes_report_and_plots(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path / "data"))
    data = synthetic_file(tmp_path / "tiny.jsonl.gz")
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app, ["eval", "replay", str(data), "--out", str(out), "--variants", "majority,default", "--seed", "2"]
    )
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert "| default | 12 |" in report and "## Ada Tester" in report
    assert "bound coverage" in report and "## Autonomy against history" in report
    for png in ("learning_curve.png", "reliability.png", "autonomy_error.png"):
        assert (out / png).stat().st_size > 1000
    results = json.loads((out / "results.json").read_text())
    assert [r["variant"]["name"] for r in results] == ["majority", "default"]
    assert [r["variant"]["seed"] for r in results] == [2, 2] and "Seed: 2 " in report
    # The proxy learns the alternation by task type: after a few gates it is right.
    default = results[1]["overall"]
    assert default["accuracy"] > 0.5
    # Its realized autonomy, pooled: 12 gates prove nothing at 5%, so none alone and no error.
    assert default["autonomy"]["share"] == 0.0 and default["autonomy"]["error"] is None


def test_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reviewer": "x", "seq": 0}\n')
    with pytest.raises(VicarError, match=r"bad.jsonl:1: not a gate event"):
        load_events([bad])
    result = CliRunner().invoke(app, ["eval", "replay", str(bad)])
    assert result.exit_code == 1 and "not a gate event" in result.output
    assert principal_for("Junio C Hamano") == "junio-c-hamano"


def test_llm_replay_needs_a_limit_prints_the_cost_first_and_runs_the_real_sdk(tmp_path, monkeypatch):
    from tests.llm_standins import AnthropicStandIn

    standin = AnthropicStandIn(lambda body: "approve" if body["max_tokens"] < 64 else "Applied.\nCONFIDENCE: 0.9")
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.root)
    data = synthetic_file(tmp_path / "tiny.jsonl.gz", n=6)
    run = CliRunner()
    try:
        no_limit = run.invoke(app, ["eval", "replay", str(data), "--predictor", "anthropic"])
        assert no_limit.exit_code == 2 and "give --limit" in no_limit.output
        declined = run.invoke(
            app,
            [
                "eval",
                "replay",
                str(data),
                "--predictor",
                "anthropic",
                "--limit",
                "3",
                "--variants",
                "composite-anthropic",
                "--out",
                str(tmp_path / "r0"),
            ],
            input="n\n",
        )
        assert declined.exit_code == 1 and "estimated cost at most $" in declined.output
        assert "nothing was called" in declined.output and standin.requests == []
        ok = run.invoke(
            app,
            [
                "eval",
                "replay",
                str(data),
                "--predictor",
                "anthropic",
                "--limit",
                "3",
                "--yes",
                "--variants",
                "majority,composite-anthropic",
                "--out",
                str(tmp_path / "r1"),
            ],
        )
        assert ok.exit_code == 0, ok.output
        assert ok.output.index("estimated cost") < ok.output.index("composite-anthropic")
        results = json.loads((tmp_path / "r1" / "results.json").read_text())
        llm = results[1]["overall"]
        assert results[1]["variant"]["predictor"] == "anthropic" and llm["gates"] == 3
        assert llm["cost_usd"] > 0  # priced from the stand-in's usage
        assert len(standin.requests) == 3 * 4  # per gate: two passes, each classified
    finally:
        standin.close()


def test_learning_curves_use_equal_windows_and_pool_by_position():
    preds = [P("approve", "approve", 0.9)] * 19 + [P("approve", "reject", 0.9)] * 4
    curve = m.learning_curve(preds, windows=10)
    sizes = [c["end"] - c["start"] for c in curve]
    assert len(curve) == 10 and max(sizes) - min(sizes) <= 1 and sum(sizes) == 23  # no 3-gate tail
    # Pooled: window i holds each reviewer's i-th tenth, so two identical histories pool to
    # the same curve as one.
    pooled = m.pooled_curve([preds, preds], windows=10)
    assert [c["accuracy"] for c in pooled] == [c["accuracy"] for c in curve]
    assert m.pooled_curve([preds[:5]], windows=10) == []  # too short to split into tenths
