"""Why a gate came to the person, in their words (issue 37 item 5): the gate view's and
the audit export's `reason_words`, made in one place (vicar/proxy/reasons.py) from the
guard and the calibration's numbers, the numbers kept as the detail. Real Temporal dev
server, real worker, real CLI; the wrong reasons the issue lists, each reproduced."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

from rich.console import Console

from vicar.cli.gate_render import escalations_table
from vicar.client import add_rule, get_gate
from vicar.client.gates import gate_details, start_gate
from vicar.models import AnsweredBy, AutonomyRule, CalibrationInputs
from vicar.models.audit import AuditPageRequest
from vicar.proxy.audit_trail import audit_page
from vicar.proxy.calibration import calibrate
from vicar.proxy.reasons import ReasonFacts, reason_words
from vicar.settings import CalibrationParams

from .conftest import wait_escalated, wait_for
from .test_gate_guards import ARTIFACT, seed
from .test_gate_show import vicar


async def _gate(h, p: str, mode: str, artifact: str = ARTIFACT, **kw):
    req = h.request(p, task_type="docs", artifact=artifact, escalation_mode=mode, **kw)
    return req, await start_gate(h.client, req, h.task_queue)


async def test_an_always_gate_says_it_asks_every_time_not_passthrough(harness):
    """Mode `always` on a gate the proxy could have answered alone: the reason is the
    mode, never 'passthrough (proven threshold ...)' under 'Why it escalated'."""
    h = harness
    p = h.principal()
    seed(h, p, [("approve", "Fine.")] * 4, datetime.now(UTC) - timedelta(hours=1))
    req, handle = await _gate(h, p, "always")
    await wait_escalated(h.client, req.gate_id)
    view = await (await get_gate(h.client, req.gate_id)).view()
    assert view.calibration_guard == "passthrough"  # no guard fired: only the mode sent it
    assert "every time" in view.reason_words and "always" in view.reason_words
    shown = await vicar(h, "gate", "show", req.gate_id)
    assert shown.returncode == 0, shown.stderr
    assert "Why it came to you" in shown.stdout and "asks you every time" in shown.stdout
    assert "Why it escalated" not in shown.stdout
    assert "passthrough (proven" not in shown.stdout and "guard passthrough)" not in shown.stdout
    assert "acts alone from" in shown.stdout  # the numbers stay, as the detail
    # `vicar escalations`' table: the words, then the numbers as the detail.
    details = await gate_details(h.client, req.gate_id)
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(escalations_table([details], datetime.now(UTC)))
    # A listing knows the mode too (the details carry it): the same words as the page.
    assert details is not None and details.escalation_mode == "always"
    listed = out.getvalue()
    assert "why: " in listed and "every time" in listed and "or no clear answer" not in listed
    assert "detail: acts alone from" in out.getvalue()
    await handle.terminate(reason="test: done")


async def test_a_gate_answered_alone_says_why_it_answered(harness):
    """A `never` gate the proxy answered from an empty memory (guard cold_start): `gate
    show` does not print 'Why it escalated' on it."""
    h = harness
    p = h.principal()
    req, handle = await _gate(h, p, "never")
    result = await handle.result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy
    view = await (await get_gate(h.client, req.gate_id)).view()
    assert "never asks you" in view.reason_words
    shown = await vicar(h, "gate", "show", req.gate_id)
    assert shown.returncode == 0, shown.stderr
    assert "Why it escalated" not in shown.stdout and "Why it came to you" not in shown.stdout
    assert "Why it answered" in shown.stdout and "never asks you" in shown.stdout


async def test_rules_reasons_and_the_audit_exports_rule_note(harness):
    """An ask rule: the reason names it. An answer rule: the audit export's proxy_words
    are the proxy's (none: it was not consulted), the rule's note has its own field."""
    h = harness
    p = h.principal()
    where = dict(task_queue=h.task_queue)
    await add_rule(h.client, p, dict(name="no-drop", effect="ask", words=["DROP TABLE"]), by="alice", **where)
    await add_rule(h.client, p, dict(name="docs-ok", effect="approve", task_types=["docs"]), by="dana", **where)

    asked, asked_handle = await _gate(h, p, "never", artifact=ARTIFACT + " Also: DROP TABLE users;")
    await wait_escalated(h.client, asked.gate_id)
    view = await (await get_gate(h.client, asked.gate_id)).view()
    assert view.reason_words == "Your rule “no-drop” (alice's) asks you about gates like this"
    await asked_handle.terminate(reason="test: done")

    ruled, ruled_handle = await _gate(h, p, "when_unsure")
    assert (await ruled_handle.result()).answered_by is AnsweredBy.rule
    view = await (await get_gate(h.client, ruled.gate_id)).view()
    assert view.reason_words == "Your rule “docs-ok” (dana's) answered this gate"

    store = h.registry.get(p).store

    async def exported():
        page = audit_page(store, AuditPageRequest(principal=p))
        return [r for r in page.records if r.gate_id == ruled.gate_id] or None

    [record] = await wait_for(exported)
    assert record.answered_by == "rule" and record.rule == "docs-ok"
    assert record.proxy_words == ""  # the rule's note is not the proxy's words
    assert record.rule_note == "rule docs-ok (approve, by dana)"
    assert record.reason_words == "Your rule “docs-ok” (dana's) answered this gate"


async def test_a_gate_answered_alone_states_its_confidence_against_the_threshold(harness):
    """The proxy answered alone: the words put its confidence beside the threshold it
    had to reach, both as the person reads them (percent, same scale)."""
    h = harness
    p = h.principal()
    seed(h, p, [("approve", "Fine.")] * 4, datetime.now(UTC) - timedelta(hours=1))
    req, handle = await _gate(h, p, "when_unsure")
    result = await handle.result()
    assert not result.escalated and result.answered_by is AnsweredBy.proxy
    view = await (await get_gate(h.client, req.gate_id)).view()
    said = re.fullmatch(r"Vicar answered alone: it is (\d+)% sure and acts alone from (\d+)% here", view.reason_words)
    assert said, view.reason_words
    assert int(said[1]) == round(100 * result.confidence) and int(said[2]) <= int(said[1])


PROVEN = AutonomyRule(threshold=0.8, bound=0.048, evidence=612, errors=12, target=0.05, delta=0.05, audit_share=0.05)
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
QUIET = CalibrationInputs(memory_depth=5, now=NOW, last_human_at=NOW - timedelta(days=1), rule=PROVEN, audit_draw=0.9)


def _words(
    confidence: float, inp: CalibrationInputs = QUIET, params: CalibrationParams | None = None, **facts
) -> tuple[str, str]:
    cal = calibrate(confidence, inp, params or CalibrationParams())
    f = ReasonFacts(
        guard=cal.guard,
        note=cal.note,
        confidence=cal.confidence,
        threshold=cal.threshold_shown,
        target=cal.target,
        task_type="docs",
        **({"escalated": not cal.autonomous} | facts),
    )
    return reason_words(f), cal.note


def test_the_threshold_is_shown_on_the_confidences_scale():
    """Under a recalibration map the confidence shown is not the score: the threshold
    beside it goes through the same map, so '62% sure' is never set against a raw 0.80."""
    mapped = QUIET.model_copy(update={"confidence_map": (1.0, -0.5)})
    cal = calibrate(0.7, mapped, CalibrationParams())
    assert cal.guard == "unproven" and cal.threshold == 0.8
    assert cal.threshold_shown is not None and cal.threshold_shown < 0.8 and cal.confidence < cal.threshold_shown
    words, note = _words(0.7, mapped)
    assert words == f"Vicar is {round(100 * cal.confidence)}% sure; it acts alone only from " + (
        f"{round(100 * cal.threshold_shown)}% here"
    )
    # The numbers stay as the detail, on the same scale as the words: one number for the threshold.
    assert f"{round(100 * cal.confidence)}% sure < {round(100 * cal.threshold_shown)}% needed to act alone" in note


def test_every_guard_reads_as_words_not_jargon():
    """Each guard the calibration fires, and the gate's own reasons, in words: none is
    empty, none is the guard's name or the note's jargon (bound, threshold 0.)."""
    cases = {
        "unproven": _words(0.6)[0],
        "no threshold": _words(0.9, QUIET.model_copy(update={"rule": PROVEN.model_copy(update={"threshold": None})}))[
            0
        ],
        "cold_start": _words(
            0.9, QUIET.model_copy(update={"memory_depth": 0}), CalibrationParams(memory_depth_threshold=3)
        )[0],
        "tension": _words(0.9, QUIET.model_copy(update={"tension": "memories c-1 and c-2 disagree"}))[0],
        "staleness": _words(0.9, QUIET.model_copy(update={"last_human_at": NOW - timedelta(days=400)}))[0],
        "audit": _words(0.9, QUIET.model_copy(update={"audit_draw": 0.01}))[0],
        "untrusted": _words(
            0.9, QUIET.model_copy(update={"agent": "bot", "agent_human_answers": 99, "agent_trust": 0.1})
        )[0],
        "probation": _words(0.9, QUIET.model_copy(update={"agent": "bot", "agent_human_answers": 0}))[0],
        "alone": _words(0.9)[0],
        "always": _words(0.9, escalated=True, escalation_mode="always")[0],
        "never": _words(0.1, escalated=False, escalation_mode="never")[0],
        "paused": reason_words(ReasonFacts(guard="paused", note="paused by carol at 2026-11-22", escalated=True)),
        "proxy_error": reason_words(
            ReasonFacts(guard="proxy_error", note="proxy unavailable: ProviderDown: 503", escalated=True)
        ),
        "refused": reason_words(
            ReasonFacts(guard="proxy_error", note="proxy unavailable: ArtifactRefused: x", escalated=True)
        ),
    }
    assert cases["unproven"] == "Vicar is 60% sure; it acts alone only from 80% here"
    close = reason_words(
        ReasonFacts(
            guard="unproven",
            note="score 0.87 < proven threshold 0.87",
            escalated=True,
            confidence=0.866,
            threshold=0.874,
        )
    )
    assert close == "Vicar is 86.6% sure; it acts alone only from 87.4% here"
    assert cases["no threshold"].startswith("Vicar has not yet proven on your answers so far")
    assert "wrong at most 5% of the time" in cases["no threshold"]
    assert cases["cold_start"] == "New kind of work: Vicar has not seen enough of your answers on docs yet"
    assert cases["alone"] == "Vicar answered alone: it is 90% sure and acts alone from 80% here"
    assert cases["audit"].startswith("A spot check: Vicar is 90% sure; it may act alone from 80% here")
    assert "every time" in cases["always"] and "never asks you" in cases["never"]
    assert "paused" in cases["paused"] and "unavailable" in cases["proxy_error"]
    assert cases["refused"].startswith("Vicar could not read this gate's artifact")
    for name, words in cases.items():
        assert words and not re.search(r"bound|threshold|_|c-\d|\b0\.\d", words), (name, words)
