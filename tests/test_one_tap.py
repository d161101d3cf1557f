"""The one-tap answer (issue 36's one-tap goal): the learned proxy offers, beside its
proposal, the likeliest answer that needs no words. Its proposal may be `correct`, whose
changes the person still writes; the tap is then the best of the others.
docs/knowing-the-person.md has the replay's figures."""

from __future__ import annotations

from vicar.demo import scenario, scripted_human
from vicar.memory.principal import PrincipalMemory
from vicar.models import Action, AnsweredBy, OutcomeRecord
from vicar.proxy.consult import consult
from vicar.proxy.learned import ONE_TAP, LearnedPredictor, likeliest_tap
from vicar.proxy.outcomes import record_outcome
from vicar.settings import MemoryParams, Settings


def test_the_tap_is_the_likeliest_answer_that_needs_no_words():
    classes = [Action.approve, Action.correct, Action.reject]
    assert likeliest_tap(classes, [0.2, 0.5, 0.3]) is Action.reject
    assert likeliest_tap(classes, [0.6, 0.3, 0.1]) is Action.approve
    assert likeliest_tap([Action.correct], [1.0]) is None


def test_the_learned_proxy_offers_a_tap_beside_a_correct(tmp_path, embedder):
    """The demo's person asks for a rollback step on migrations without one (`correct`)
    and approves the rest: once the model is fitted, a migration's proposal is `correct`
    and its tap another answer; every tap needs no words."""
    settings = Settings(data_dir=tmp_path)
    memory = PrincipalMemory("ada", tmp_path / "principals", embedder, MemoryParams())
    predictor = LearnedPredictor(settings.predictor)
    posteriors = []
    try:
        for n, req in enumerate((r for wave in scenario("ada", 60, "habit") for r in wave), 1):
            c = consult(memory, predictor, req, n, settings)
            human = scripted_human(req)
            record = OutcomeRecord(
                request=req,
                n=n,
                workflow_id=f"vicar-gate/{req.gate_id}",
                action=Action(human.action),
                response_text=human.text,
                answered_by=AnsweredBy.human,
                prior=c.prior,
                posterior=c.posterior,
                calibration=c.calibration,
            )
            record_outcome(memory, record, artifacts=False, params=settings.calibration)
            predictor.observe(record)
            posteriors.append((human.action, c.posterior))
    finally:
        memory.close()
    fitted = [(h, p) for h, p in posteriors if p.tap is not None]
    assert len(fitted) >= 20  # the model's first fit comes within the 60 gates
    assert all(p.tap in ONE_TAP for _, p in fitted)
    corrects = [p for _, p in fitted if p.action is Action.correct]
    assert corrects and all(p.tap is not Action.correct for p in corrects)


def test_the_inbox_offers_no_one_tap_answer_that_needs_words(tmp_path):
    """The list's one-tap button is Approve, whatever the proxy's tap: a reject sent in
    one tap carries no words (issue 46). A proposed reject is offered on the gate's page,
    where the words are written."""
    import re

    from vicar.inbox.cards import card
    from vicar.inbox.web import Inbox
    from vicar.models import GateDetails

    env = Inbox(settings=Settings(data_dir=tmp_path)).templates
    base = dict(gate_id="g", principal="p", state="WORK_ASSERT", task_type="docs", status="escalated")
    why = dict(question="Q?", artifact_excerpt="x = 1", calibration_guard="cold_start", calibration_note="depth 0")

    def tap_form(details: GateDetails) -> str:
        row = dict(d=details, c=card(details, None), wid="vicar-gate/g")
        page = env.get_template("list.html").render(
            rows=[row], total=1, want={}, principals=[], states=[], task_types=[], csrf="x", here="/"
        )
        return "".join(re.findall(r'<form class="tap".*?</form>', page, re.S))

    rejecting = tap_form(GateDetails(**base, **why, proxy_action=Action.reject, proxy_tap=Action.reject))
    assert 'value="reject"' not in rejecting and ">Reject</button>" not in rejecting
    assert 'name="action" value="approve"' in rejecting and 'href="/gates/vicar-gate/g#answer"' in rejecting
    plain = tap_form(GateDetails(**base, **why))
    assert 'name="action" value="approve"' in plain and ">Approve</button>" in plain
