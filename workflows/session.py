"""A principal's working session: working memory loaded once at the start, gates join
and finish, and at the end (an explicit `end` signal, or idle for the configured time:
a durable timer) consolidation runs over the session's new memories."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.memory.consolidation_plan import ConsolidationReport
    from vicar.models import Usage
    from vicar.models.session import (
        ConsolidationInput,
        JoinReply,
        SessionConfig,
        SessionGate,
        SessionInput,
        SessionJoin,
        SessionSummary,
        WorkingMemoryView,
    )
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.sealed import one_arg, signal_arg


def _check(inp: SessionInput) -> None:
    wid = workflow.info().workflow_id
    if wid != c.session_workflow_id(inp.principal, inp.session_id):
        raise ValueError(f"session {inp.principal}/{inp.session_id} does not own workflow id {wid!r}")
    cfg = inp.config
    if not (cfg.idle_timeout_seconds > 0 and cfg.token_budget >= 0 and cfg.consolidation_heartbeat_seconds > 0):
        raise ValueError("idle_timeout_seconds and consolidation_heartbeat_seconds must be positive")


@workflow.defn(name=c.SESSION_WORKFLOW)
class SessionWorkflow:
    @workflow.init
    @raw_argument
    def __init__(self, *args: RawValue) -> None:
        # A bad input fails the run in its first task (run() raises it).
        self._bad: ApplicationError | None = None
        try:
            inp = one_input(args, SessionInput, "session input", _check)
        except ApplicationError as exc:
            self._bad = exc
            inp = SessionInput.model_construct(
                principal="", session_id="", config=SessionConfig(), shard=None, shard_wait_seconds=60.0
            )
        self._inp = inp
        self._wm: WorkingMemoryView | None = None
        self._gates: dict[str, SessionGate] = {}
        self._ended_by: str | None = None
        self._poked = False
        self._status = "loading"
        self._report: ConsolidationReport | None = None

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> SessionSummary:
        if self._bad is not None:
            raise self._bad
        inp = self._inp
        try:
            self._wm = await run_memory_activity(
                c.LOAD_WORKING_MEMORY,
                c.WorkingMemoryInput(principal=inp.principal, token_budget=inp.config.token_budget),
                WorkingMemoryView,
                c.LOAD_OPTIONS,
                shard=inp.shard,
                wait_seconds=inp.shard_wait_seconds,
            )
        except (ActivityError, ApplicationError) as exc:
            # A broken memory (non-retryable): the session opens without working memory
            # rather than holding its gates; they escalate with the reason themselves.
            workflow.logger.warning("session %s opens without working memory: %s", inp.session_id, exc.cause or exc)
            self._wm = WorkingMemoryView(n=0, block="")
        self._status = "open"
        idle = timedelta(seconds=inp.config.idle_timeout_seconds)
        while self._ended_by is None:
            self._poked = False
            try:
                await workflow.wait_condition(lambda: self._ended_by is not None or self._poked, timeout=idle)
            except TimeoutError:
                # Idle: nothing joined or finished for the whole timeout. A gate still in
                # flight (e.g. waiting for its human) keeps the session open.
                if not any(not g.done for g in self._gates.values()):
                    self._ended_by = "idle"
        self._status = "consolidating"
        finished = [g.workflow_id for g in self._gates.values() if g.done]
        self._report = await workflow.execute_child_workflow(
            c.CONSOLIDATION_WORKFLOW,
            ConsolidationInput(
                principal=inp.principal,
                session_id=inp.session_id,
                gate_workflow_ids=finished,
                heartbeat_seconds=inp.config.consolidation_heartbeat_seconds,
            ),
            id=c.consolidation_workflow_id(inp.principal, inp.session_id),
            result_type=ConsolidationReport,
            # Consolidation rewrites memory under the brain's turn: it finishes even if
            # the session is terminated meanwhile.
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        self._status = "done"
        return self.summary()

    @workflow.update(name=c.JOIN_UPDATE)
    @raw_argument
    async def join(self, *args: RawValue) -> JoinReply:
        j = one_arg(args, SessionJoin, c.JOIN_UPDATE)  # the validator refused a bad one
        await workflow.wait_condition(lambda: self._wm is not None)
        assert self._wm is not None
        self._gates.setdefault(j.gate_id, SessionGate(gate_id=j.gate_id, workflow_id=j.workflow_id))
        self._poked = True
        return JoinReply(working_memory=self._wm.block, n=self._wm.n)

    @join.validator
    @raw_argument
    def _validate_join(self, *args: RawValue) -> None:
        one_arg(args, SessionJoin, c.JOIN_UPDATE)
        if self._ended_by is not None:
            raise ValueError(f"session {self._inp.session_id} has ended ({self._ended_by})")

    @workflow.signal(name=c.GATE_DONE_SIGNAL)
    @raw_argument
    def gate_done(self, *args: RawValue) -> None:
        g = signal_arg(args, SessionGate, c.GATE_DONE_SIGNAL)
        if g is None:
            return
        self._gates[g.gate_id] = g.model_copy(update={"done": True})
        self._poked = True

    @workflow.signal(name=c.END_SIGNAL)
    @raw_argument
    def end(self, *args: RawValue) -> None:
        # No argument: one given (which failed the task before) is refused, not guessed at.
        if args:
            workflow.logger.warning("ignored %s: it takes no argument, got %d", c.END_SIGNAL, len(args))
            return
        if self._ended_by is None:
            self._ended_by = "signal"

    @workflow.query(name=c.SUMMARY_QUERY)
    def summary(self) -> SessionSummary:
        usage = Usage()
        for g in self._gates.values():
            usage = usage + g.usage
        wm = self._wm
        return SessionSummary(
            principal=self._inp.principal,
            session_id=self._inp.session_id,
            status=self._status,
            ended_by=self._ended_by,
            n_at_start=wm.n if wm else None,
            working_memory_tokens=wm.tokens if wm else 0,
            working_memory_chunks=len(wm.chunk_ids) if wm else 0,
            gates=list(self._gates.values()),
            usage=usage,
            consolidation=self._report,
        )
