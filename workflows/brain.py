"""The brain: one workflow per principal that owns the interaction counter and hands
the proxy's attention to one holder at a time, first come first served. The protocol
(asking, granting, giving back by record or by signal) is described in workflows/turn.py,
with the holder's side and the counter steps; the asks are activities/turns.py.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    import vicar.contracts as c
    from vicar.errors import TurnRefused
    from vicar.models import BrainConfig, BrainInput, BrainState, BrainStatus, TurnGrant, TurnReply, TurnRequest
    from vicar.models.control import Control, ControlChange, apply_change
    from vicar.runtime.sharding import MAX_SHARDS, shard_of
    from vicar.workflows.failures import cause_message
    from vicar.workflows.inputs import one_input, raw_argument
    from vicar.workflows.routing import run_memory_activity
    from vicar.workflows.sealed import KeyWatch, one_arg, signal_arg
    from vicar.workflows.turn import advance_turn, read_counter


def _check(inp: BrainInput) -> None:
    """What the model's types allow but the brain cannot run with: a run that continues
    as new at once for ever, a lease that never holds, another principal's id."""
    cfg, wid = inp.config, workflow.info().workflow_id
    if wid != c.brain_workflow_id(inp.principal):
        raise ValueError(f"principal {inp.principal!r} does not own workflow id {wid!r}")
    if not (
        cfg.lease_seconds > 0
        and cfg.max_grants_per_run >= 1
        and cfg.remembered_gates >= 1
        and cfg.shard_wait_seconds > 0
    ):
        raise ValueError(
            "lease_seconds and shard_wait_seconds must be positive, max_grants_per_run and remembered_gates at least 1"
        )
    if cfg.shard_count is not None and not 1 <= cfg.shard_count <= MAX_SHARDS:
        raise ValueError(f"shard_count runs from 1 to {MAX_SHARDS}")


@workflow.defn(name=c.BRAIN_WORKFLOW)
class BrainWorkflow:
    @workflow.init
    @raw_argument
    def __init__(self, *args: RawValue) -> None:
        # The carried state is in place before any handler runs: a release or a request
        # that arrives with the new run must act on the carried holder and queue, not on
        # an empty state that run() would then overwrite. A bad input fails the run in its
        # first task (run() raises it); handlers meanwhile act on an empty state.
        self._bad: ApplicationError | None = None
        self._keys = KeyWatch(args)  # continues as new when the workers' key changes
        try:
            inp = one_input(args, BrainInput, "brain input", _check)
        except ApplicationError as exc:
            self._bad = exc
            inp = BrainInput.model_construct(principal="", config=BrainConfig(), state=None)
        self._state = inp.state.model_copy(deep=True) if inp.state is not None else BrainState()
        if self._state.shard is None and inp.config.shard_count:
            # Recorded once: a later change of the deployment's count does not move a memory.
            self._state.shard = shard_of(inp.principal, inp.config.shard_count)
        self._assigned: dict[str, int] = dict(self._state.assigned)
        self._regrant = False
        self._run_grants = 0
        self._principal = inp.principal
        self._config = inp.config
        self._ready = False  # the first read of the counter is done (successful or not)
        self._counter_read = False  # the counter is at least the stored one
        # A brain started afresh (not continued) takes back the rules and pauses kept in the
        # store: no turn is granted until they are read.
        self._control_read = inp.state is not None
        self._granting = asyncio.Lock()  # one grant at a time: the update and the loop both grant
        self._asked: str | None = None  # the holder last asked (turn_wanted) to give the turn back

    # -- handlers --------------------------------------------------------------

    @workflow.update(name=c.TAKE_TURN_UPDATE)
    @raw_argument
    async def take_turn(self, *args: RawValue) -> TurnReply:
        req = one_arg(args, TurnRequest, c.TAKE_TURN_UPDATE)  # the validator refused a bad one
        self._keys.saw(args)
        await workflow.wait_condition(lambda: self._ready)
        st = self._state
        async with self._granting:
            if st.holder is not None and st.holder.gate_id == req.gate_id:
                # a retried request: the same turn, the same N
                return TurnReply(n=st.holder_n, shard=st.shard, control=self._control())
            if _ask_again(st.queue, req):
                return TurnReply(n=None, shard=st.shard)
            if not st.queue:
                try:
                    n = await self._assign(req)
                except TurnRefused as exc:
                    return TurnReply(n=None, error=str(exc), shard=st.shard)
                if n is not None:
                    # Nobody waits: the holder's outcome record gives the turn back.
                    return TurnReply(n=n, shard=st.shard, release=False, control=self._control())
            st.queue.append(req)
            return TurnReply(n=None, shard=st.shard)

    @take_turn.validator
    @raw_argument
    def _check_take_turn(self, *args: RawValue) -> None:
        one_arg(args, TurnRequest, c.TAKE_TURN_UPDATE)

    @workflow.signal(name=c.REQUEST_TURN_SIGNAL)
    @raw_argument
    def request_turn(self, *args: RawValue) -> None:
        req = signal_arg(args, TurnRequest, c.REQUEST_TURN_SIGNAL)
        if req is None:
            return
        self._keys.saw(args)
        st = self._state
        if st.holder is not None and st.holder.gate_id == req.gate_id:
            st.holder.ask = req.ask  # the grant names the latest ask
            self._regrant = True  # the gate asked again (activity retry): grant again, same N
            return
        if _ask_again(st.queue, req):
            return
        st.queue.append(req)

    @workflow.signal(name=c.RELEASE_TURN_SIGNAL)
    @raw_argument
    def release_turn(self, *args: RawValue) -> None:
        gate_id = signal_arg(args, str, c.RELEASE_TURN_SIGNAL)
        if gate_id is None:
            return
        self._keys.saw(args)
        st = self._state
        if st.holder is not None and st.holder.gate_id == gate_id:
            st.holder = st.holder_n = st.lease_deadline = None

    @workflow.signal(name=c.REKEY_SIGNAL)
    @raw_argument
    def rekey(self, *args: RawValue) -> None:
        """Move to the workers' new key now (docs/codec.md, rotation): a brain that takes
        no turn meanwhile would otherwise keep the old key in its history."""
        who = signal_arg(args, str, c.REKEY_SIGNAL)
        if who is not None:
            self._keys.saw(args)
            workflow.logger.info("brain of %s: rekey asked by %s", self._principal, who[:100])

    @workflow.update(name=c.SET_SHARD_UPDATE)
    @raw_argument
    def set_shard(self, *args: RawValue) -> bool:
        """A move's last step: only while the move holds the turn (a move whose lease ran
        out starts again: gates may have written the old copy meanwhile)."""
        change = one_arg(args, c.ShardChange, c.SET_SHARD_UPDATE)  # the validator refused a bad one
        self._keys.saw(args)
        st = self._state
        if st.holder is None or st.holder.gate_id != change.turn.gate_id:
            return False
        st.shard = change.shard
        return True

    @set_shard.validator
    @raw_argument
    def _check_set_shard(self, *args: RawValue) -> None:
        one_arg(args, c.ShardChange, c.SET_SHARD_UPDATE)

    @workflow.update(name=c.CONTROL_UPDATE)
    @raw_argument
    async def change_control(self, *args: RawValue) -> Control:
        """The human's rules and pauses, changed; the next turn granted carries them. A
        malformed change never gets here: the validator refuses it before it enters
        history. The change is kept in the principal's store too (a terminated brain's
        successor takes it back); while the kept copy cannot be read, a change is
        refused (it could be lost), and the principal's turns are refused meanwhile."""
        await workflow.wait_condition(lambda: self._ready)
        if not self._control_read and (reason := await self._restore_control()):
            raise ApplicationError(f"not changed: {reason}", non_retryable=True)
        try:
            new = apply_change(self._state.control, _change(args), workflow.now())
        except ValueError as exc:  # the state changed since the validator ran
            raise ApplicationError(str(exc), non_retryable=True) from None
        self._keys.saw(args)
        self._state.control = new
        if new.version:
            try:
                await run_memory_activity(
                    c.KEEP_CONTROL,
                    c.ControlKeep(principal=self._principal, control=new),
                    bool,
                    c.COUNTER_OPTIONS,
                    shard=self._state.shard,
                    wait_seconds=self._config.shard_wait_seconds,
                    local=True,
                )
            except (ActivityError, ApplicationError) as exc:
                # The change holds here: an off switch must not wait for a broken store.
                workflow.logger.warning("brain of %s could not keep its rules: %s", self._principal, _reason(exc))
        return new

    @change_control.validator
    @raw_argument
    def _check_control(self, *args: RawValue) -> None:
        # Raises, one line (a plain or foreign payload too), or changes nothing.
        apply_change(self._state.control, _change(args), workflow.now())

    @workflow.query(name=c.CONTROL_QUERY)
    def control_state(self) -> Control:
        return self._state.control

    def _control(self) -> Control | None:
        """What a granted turn carries: None while there is nothing (the reply stays as it was)."""
        return None if self._state.control.empty() else self._state.control

    @workflow.query(name=c.BRAIN_STATUS_QUERY)
    def status(self) -> BrainStatus:
        st = self._state
        return BrainStatus(
            principal=self._principal,
            counter=st.counter,
            queued=[q.gate_id for q in st.queue],
            holder=st.holder.gate_id if st.holder else None,
            run_grants=self._run_grants,
            shard=st.shard,
        )

    # -- main loop -------------------------------------------------------------

    @workflow.run
    @raw_argument
    async def run(self, *args: RawValue) -> None:
        if self._bad is not None:
            raise self._bad
        cfg = self._config
        st = self._state
        await self._read_counter()  # if it fails, each turn tries again before handing out an N
        if not self._control_read:
            await self._restore_control()  # if it fails, each turn tries again, as for the counter
        self._ready = True

        while True:
            if self._should_continue_as_new(cfg.max_grants_per_run) or self._keys.changed:
                await workflow.wait_condition(workflow.all_handlers_finished)
                st.assigned = list(self._assigned.items())[-cfg.remembered_gates :]
                workflow.continue_as_new(BrainInput(principal=self._principal, config=cfg, state=st))

            timeout = None
            if st.holder is not None and st.lease_deadline is not None:
                timeout = max(st.lease_deadline - workflow.now().timestamp(), 0.001)
            try:
                await workflow.wait_condition(
                    lambda: (
                        self._regrant
                        or (bool(st.queue) and (st.holder is None or self._asked != st.holder.gate_id))
                        or self._should_continue_as_new(cfg.max_grants_per_run)
                        or self._keys.changed
                    ),
                    timeout=timeout,
                )
            except TimeoutError:
                await self._lease_expired()
                continue

            if self._regrant and st.holder is not None and st.holder_n is not None:
                self._regrant = False
                await self._grant(st.holder, st.holder_n)
                continue
            self._regrant = False
            if st.holder is not None and st.queue and self._asked != st.holder.gate_id:
                await self._hand_on()
                continue
            if st.holder is None and st.queue:
                async with self._granting:
                    if st.holder is not None or not st.queue:
                        continue  # the update handler granted meanwhile
                    req = st.queue.pop(0)
                    try:
                        n, refused = await self._assign(req), None
                    except TurnRefused as exc:
                        n, refused = None, str(exc)
                await self._grant(req, n, refused)

    async def _hand_on(self) -> None:
        """Someone waits behind a holder: grant the next one if the holder's record is
        in, else ask the holder to give the turn back (a holder already gone frees it)."""
        st = self._state
        async with self._granting:
            if st.holder is None or not st.queue:
                return
            holder, req = st.holder, st.queue[0]
            try:
                n = await self._assign(req)
            except TurnRefused:
                n = None  # the store cannot say: the holder is asked, and releases by signal
            if n is not None:
                st.queue = [q for q in st.queue if q is not req]
        if n is not None:
            await self._grant(req, n)
            return
        self._asked = holder.gate_id
        try:
            await workflow.get_external_workflow_handle(holder.workflow_id).signal(c.TURN_WANTED_SIGNAL, holder.gate_id)
        except FailureError:
            # The holder is gone (finished, terminated) without a record: the turn is free.
            if st.holder is holder:
                st.holder = st.holder_n = st.lease_deadline = None

    async def _lease_expired(self) -> None:
        st = self._state
        holder = st.holder
        if holder is None:
            return
        recorded = False
        try:
            recorded = (await self._advance(None, holder.workflow_id)).free
        except (ActivityError, ApplicationError):
            pass
        if not recorded:
            workflow.logger.warning("gate %s held the turn past its lease; taking it back", holder.gate_id)
        if st.holder is holder:
            st.holder = st.holder_n = st.lease_deadline = None

    async def _assign(self, req: TurnRequest) -> int | None:
        """Make `req` the holder with its N: the gate's earlier N if it had one (a retry
        across continue-as-new), else the next counter value. While a holder is set, only
        once its record is in: None if it is not (nothing changed)."""
        st = self._state
        after = st.holder.workflow_id if st.holder is not None else None
        n = self._assigned.get(req.gate_id)
        fresh = n is None
        if fresh and not self._counter_read and (reason := await self._read_counter()):
            raise TurnRefused(reason)
        if not self._control_read and (reason := await self._restore_control()):
            raise TurnRefused(reason)  # fail closed: a turn granted without the human's rules could break one
        if fresh:
            n = st.counter + 1
        # Mirror before granting (a brain started again resumes past it), and only once
        # the holder's record is in (its record is its release).
        try:
            if (fresh or after is not None) and not (await self._advance(n if fresh else None, after)).free:
                return None
        except (ActivityError, ApplicationError) as exc:
            raise TurnRefused(_reason(exc)) from None
        assert n is not None
        if fresh:
            st.counter = n
            self._assigned[req.gate_id] = n
            while len(self._assigned) > self._config.remembered_gates:
                self._assigned.pop(next(iter(self._assigned)))
        st.holder, st.holder_n = req, n
        st.lease_deadline = workflow.now().timestamp() + self._config.lease_seconds
        self._run_grants += 1
        if any(q.gate_id == req.gate_id and q is not req for q in st.queue):
            # The gate asked again by signal while this grant was in flight (its workflow
            # task was retried on another worker, whose ticket said "queued"); the reply
            # may have gone to the dead one. Left queued behind itself it would wait for
            # the lease: take it out and grant it again by signal, same N.
            st.queue = [q for q in st.queue if q.gate_id != req.gate_id or q is req]
            self._regrant = True
        return n

    async def _advance(self, n: int | None, after: str | None) -> c.TurnAdvanced:
        return await advance_turn(self._principal, n, after, self._state.shard, self._config.shard_wait_seconds)

    async def _restore_control(self) -> str | None:
        """Take back the rules and pauses kept in the store (a brain terminated and started
        again); a later version already here (a change sent with the start) stays.
        Returns why the store could not be read, or None."""
        try:
            kept = await run_memory_activity(
                c.LOAD_CONTROL,
                c.CounterInput(principal=self._principal),
                Optional[Control],
                c.COUNTER_OPTIONS,
                shard=self._state.shard,
                wait_seconds=self._config.shard_wait_seconds,
                local=True,
            )
        except (ActivityError, ApplicationError) as exc:
            reason = _reason(exc)
            workflow.logger.warning("brain of %s cannot read its kept rules: %s", self._principal, reason)
            return reason
        if kept is not None and kept.version > self._state.control.version:
            self._state.control = kept
        self._control_read = True
        return None

    async def _read_counter(self) -> str | None:
        """Resume from the larger of carried and stored, so the counter never goes back.
        Returns why the store could not be read, or None."""
        try:
            stored = await read_counter(self._principal, self._state.shard, self._config.shard_wait_seconds)
        except (ActivityError, ApplicationError) as exc:
            reason = _reason(exc)
            workflow.logger.warning("brain of %s cannot read its counter: %s", self._principal, reason)
            return reason
        self._state.counter = max(self._state.counter, stored)
        self._counter_read = True
        return None

    def _should_continue_as_new(self, max_grants: int) -> bool:
        return self._run_grants >= max_grants or workflow.info().is_continue_as_new_suggested()

    async def _grant(self, req: TurnRequest, n: int | None, refused: str | None = None) -> None:
        try:
            # Others still waiting: this holder gives the turn back by signal, not by its record.
            release = bool(self._state.queue)
            if release:
                self._asked = req.gate_id
            await workflow.get_external_workflow_handle(req.workflow_id).signal(
                c.TURN_GRANTED_SIGNAL,
                TurnGrant(
                    gate_id=req.gate_id,
                    n=n,
                    error=refused,
                    shard=self._state.shard,
                    release=release,
                    control=self._control(),
                    ask=req.ask,
                ),
            )
        except FailureError as exc:
            # The gate is gone (completed, terminated): the turn goes to the next one.
            workflow.logger.warning("gate %s could not take its turn: %s", req.gate_id, exc)
            if self._state.holder is req:
                self._state.holder = self._state.holder_n = self._state.lease_deadline = None


def _ask_again(queue: list[TurnRequest], req: TurnRequest) -> bool:
    """Whether the holder already waits in the queue; its grant will name this ask."""
    for q in queue:
        if q.gate_id == req.gate_id:
            q.ask = req.ask
            return True
    return False


def _change(args: tuple) -> ControlChange:
    return one_arg(args, ControlChange, "control change")  # RefusedWrite: a ValueError, one line


def _reason(exc: ActivityError | ApplicationError) -> str:
    reason = cause_message(exc)
    return reason if reason.startswith("memory unavailable") else f"memory unavailable: {reason}"
