"""Judging a human answer when it comes (contracts.VET_ANSWERS): the principal's
allow-list as it is then, and the Temporal identity the answer came with, read by an
activity from the gate's own history. Read once at escalation, a list let a person
taken off it answer a gate already waiting, and refused one added since."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.models import GateDetails, HumanAnswer
    from vicar.workflows.failures import cause_message as _cause
    from vicar.workflows.sealed import one_arg

from vicar.workflows.gate_state import GateState

# Judging an answer when it comes (allow-list, caller identity): a few quick attempts,
# then the answer is refused with the reason (the human can answer again).
VET = dict(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=5
    ),
)


def answer_arg(args: tuple, *, sealed: bool) -> HumanAnswer:
    """An answer's payload, opened and decoded here so a bad one is refused with what is
    wrong (an oversized text names its limit, a foreign key names the key) rather than
    "Failed decoding arguments" or a failed workflow task (workflows/sealed.py)."""
    return one_arg(args, HumanAnswer, "answer", sealed=sealed)


class AnswerJudge(GateState):
    """A gate base: judging signalled answers in the main loop, and any answer's vet."""

    _details: GateDetails | None
    _answer: HumanAnswer | None
    _identity: str | None

    async def _take_vetted(self, answer: HumanAnswer, ordinal: int) -> None:
        """A signalled answer, judged now: the checks, then the allow-list and identity."""
        try:
            self._check(answer)
        except ValueError as exc:
            workflow.logger.warning("ignored human_response from %s: %s", answer.responder, exc)
            return
        verdict = await self._vet(answer, signal_ordinal=ordinal)
        if not verdict.allowed or self._answer is not None:
            workflow.logger.warning(
                "ignored human_response from %s: %s", answer.responder, verdict.why or "the gate already has an answer"
            )
            return
        self._answer, self._identity = answer, verdict.identity

    async def _vet(
        self, answer: HumanAnswer, *, update_id: str | None = None, signal_ordinal: int | None = None
    ) -> c.AnswerVerdict:
        """A regular activity, never local: it reads the update's accepted event, which is
        in history only once this workflow task has completed."""
        assert self._details is not None and answer.responder
        info = workflow.info()
        vet = c.AnswerVet(
            principal=self._details.principal,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            responder=answer.responder,
            update_id=update_id,
            signal_ordinal=signal_ordinal,
        )
        try:
            return await self._step(c.VET_ANSWER, vet, c.AnswerVerdict, VET, local=False)
        except (ActivityError, ApplicationError) as exc:
            return c.AnswerVerdict(allowed=False, why=f"the answer could not be checked: {_cause(exc)}")
