"""The gate's consult: the proxy's passes under the brain's turn (one local step, or
one activity per step for slow predictors), and the dialog between the proxy and the
agent side until the proxy decides or the human must. A mixin of GateWorkflow."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import (
        Action,
        AnsweredBy,
        Calibration,
        DialogTurn,
        GateRequest,
        GateStatus,
        ModelPin,
        PassResult,
        Surprise,
    )
    from vicar.proxy.decision import Decision, decide, surprised
    from vicar.workflows.failures import cause_message as _cause

from vicar.workflows.gate_control import GateControl

# A proxy step that keeps failing gives up after a few attempts and the gate goes to the
# human: a broken provider must not hold the principal's turn (and every gate queued
# behind it) for ever. Non-retryable errors (a bad key) give up at once.
STEP: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10), maximum_attempts=6
    ),
)
# Pinning the learned model may fit it (about 2 s at 10,000 answers): a few attempts,
# then the proxy is unavailable and the human decides.
PIN: dict[str, Any] = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=4
    ),
)


class GateConsult(GateControl):
    async def _proxy_dialog(self, req: GateRequest, n: int) -> tuple[c.ConsultResult, Decision]:
        """Consult; while the proxy's reply is a dialog line, let the agent side answer
        and consult again. Bounded: at the bound, or when either side has nothing to
        say, the human decides. Dialog never ends in an automatic approval by itself.
        The human's rules and pauses come first (workflows/gate_control.py)."""
        ruled = await self._obey(req)
        if ruled is not None:
            return ruled
        try:
            if self._local_steps and workflow.patched(c.MODEL_PIN_PATCH):
                # Under the turn, once per gate: every consult of this gate (dialog rounds,
                # retries) uses this version, whatever is fitted meanwhile.
                self._pin = await self._step(c.PIN_MODEL, req.principal, Optional[ModelPin], PIN, local=True)
            return await self._proxy_dialog_steps(req, n)
        except (ActivityError, ApplicationError) as exc:
            # The proxy could not run (provider down, bad key, broken memory): the human
            # decides, and the reason is on the gate for the operator.
            consulted, decision = self._unavailable(f"proxy unavailable: {_cause(exc)}")
            if self._forced():
                consulted = self._overruled(consulted)
                self._show(consulted)
            return consulted, decision

    def _unavailable(self, reason: str) -> tuple[c.ConsultResult, Decision]:
        failed = PassResult(prose="", note=reason, confidence=0.0)
        consulted = c.ConsultResult(
            prior=failed, posterior=failed, calibration=Calibration(confidence=0.0, guard="proxy_error", note=reason)
        )
        self._show(consulted)
        return consulted, Decision(escalate=True, action=None, text="")

    async def _proxy_dialog_steps(self, req: GateRequest, n: int) -> tuple[c.ConsultResult, Decision]:
        assert self._details is not None
        while True:
            self._details.status = GateStatus.consulting  # shown by the query, not indexed
            consulted = self._overruled(await self._consult(req, n))
            decision = decide(req, consulted.calibration, consulted.posterior, overruled=self._forced())
            self._show(consulted)
            if decision.escalate or decision.action is not Action.dialog:
                return consulted, decision
            proxy_turns = sum(1 for t in self._dialog if t.speaker == "reviewer")
            if proxy_turns >= self._max_dialog_turns:
                self._details.calibration_note = f"dialog bound: {proxy_turns} reviewer turns without a decision"
                return consulted, Decision(escalate=True, action=None, text=decision.text)
            if not await self._converse(req, decision.text, AnsweredBy.proxy):
                return consulted, Decision(escalate=True, action=None, text=decision.text)

    async def _converse(
        self, req: GateRequest, reviewer_text: str, by: AnsweredBy, responder: str | None = None
    ) -> bool:
        """Add the reviewer's line and the agent side's reply; False if the reply is empty."""
        self._dialog.append(DialogTurn(speaker="reviewer", text=reviewer_text, answered_by=by, responder=responder))
        assert self._details is not None
        self._details.dialog = list(self._dialog)  # the human sees what was asked, answered or not
        reply = await self._step(
            c.AGENT_REPLY, c.AgentReplyInput(request=req, dialog=self._dialog), result_type=c.AgentReply
        )
        self._usage = self._usage + reply.usage
        if not reply.text.strip():
            return False
        self._dialog.append(DialogTurn(speaker="agent", text=reply.text))
        self._details.dialog = list(self._dialog)
        return True

    def _final(self, action: Action | None, text: str) -> tuple[Action, str]:
        """The design: dialog followed by approve becomes correct, with the dialog as
        feedback, so the agent gets another pass with the reviewer's context."""
        assert action is not None and action is not Action.dialog
        if action is Action.approve and self._dialog:
            transcript = "\n".join(f"{t.speaker.upper()}: {t.text}" for t in self._dialog)
            return Action.correct, f"{text}\n\nFrom the review dialog:\n{transcript}".strip()
        return action, text

    def _show(self, consulted: c.ConsultResult) -> None:
        d = self._details
        assert d is not None
        d.proxy_action = consulted.posterior.action
        d.proxy_text = consulted.posterior.prose or consulted.posterior.note
        d.proxy_confidence = consulted.calibration.confidence
        d.calibration_guard = consulted.calibration.guard
        d.calibration_note = consulted.calibration.note
        d.prereview = list(consulted.posterior.prereview)
        d.unsupported = list(consulted.posterior.unsupported)
        d.lineage_verdicts = list(consulted.lineage)

    async def _consult(self, req: GateRequest, n: int) -> c.ConsultResult:
        now = workflow.now()
        gate_key = workflow.info().workflow_id
        dialog = list(self._dialog)
        if self._local_steps:
            consulted = await self._step(
                c.CONSULT,
                c.ConsultInput(
                    request=req,
                    n=n,
                    now=now,
                    gate_key=gate_key,
                    dialog=dialog,
                    working_memory=self._working_memory,
                    model=self._pin,
                ),
                result_type=c.ConsultResult,
            )
        else:
            consulted = await self._consult_in_steps(req, n, now, gate_key, dialog)
        self._usage = (
            self._usage
            + consulted.prior.usage
            + consulted.posterior.usage
            + (consulted.surprise.usage if consulted.surprise else None)
        )
        return consulted

    async def _consult_in_steps(self, req, n, now, gate_key, dialog) -> c.ConsultResult:
        """The same path as the CONSULT activity, one activity per step: each LLM call
        gets its own timeout and retries, and a retry never repeats a finished call."""
        bundle = await self._step(
            c.RETRIEVE,
            c.RetrieveInput(request=req, n=n, working_memory=self._working_memory),
            result_type=c.RetrievalBundle,
        )
        prior = await self._step(
            c.PRIOR_PASS, c.PassInput(request=req, ctx=bundle.prior, dialog=dialog), result_type=PassResult
        )
        posterior = await self._step(
            c.POSTERIOR_PASS,
            c.PassInput(request=req, ctx=bundle.posterior, prior=prior, dialog=dialog),
            result_type=PassResult,
        )
        surprise = None
        if surprised(prior, posterior):
            surprise = await self._step(
                c.EXTRACT_SURPRISE,
                c.SurpriseInput(request=req, ctx=bundle.posterior, prior=prior, posterior=posterior),
                result_type=Surprise,
            )
        calibration = await self._step(
            c.CALIBRATE,
            c.CalibrateInput(
                request=req, confidence=posterior.confidence, ctx=bundle.posterior, now=now, gate_key=gate_key
            ),
            result_type=Calibration,
        )
        if posterior.used_chunk_ids:
            # ACT-R rule 2: only the memories the proxy actually used get a trace.
            await self._step(
                c.REINFORCE,
                c.ReinforceInput(principal=req.principal, n=n, chunk_ids=posterior.used_chunk_ids),
                result_type=list[str],
            )
        return c.ConsultResult(
            prior=prior,
            posterior=posterior,
            surprise=surprise,
            calibration=calibration,
            lineage=bundle.posterior.lineage_history,
        )
