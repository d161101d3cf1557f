"""The human's rules on the worker: matching them against a gate where its artifact is
read (the rules handed over with the turn; vicar/proxy/rules.py matches), and the
brain's copy of them in the principal's store (vicar/proxy/control_store.py). A mixin
of ProxyActivities: it uses the worker's settings (artifact roots, byte cap) and registry.

Matching is read-only; a path that cannot be read fails it non-retryably, and the gate
asks the human (a rule is never skipped for want of the artifact). Keeping writes a
version only over an older one, so a retry changes nothing."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from vicar import contracts as c
from vicar.activities.store_errors import store_errors
from vicar.errors import ARTIFACT_REFUSED, STORE_UNAVAILABLE
from vicar.memory.registry import MemoryRegistry
from vicar.models.control import Control, Verdict
from vicar.proxy.control_store import keep_control, kept_control
from vicar.proxy.lineage import lineage_of
from vicar.proxy.reasons import PROXY_ERROR
from vicar.proxy.rules import needs_artifact, verdict


class RuleActivities:
    registry: MemoryRegistry  # set by ProxyActivities.__init__

    def _artifact(self, request) -> str:  # ProxyActivities._artifact
        raise NotImplementedError

    @activity.defn(name=c.MATCH_RULES)
    def match_rules(self, inp: c.RulesInput) -> Verdict | None:
        req = inp.request
        if not needs_artifact(inp.control):
            return verdict(inp.control, req, req.artifact_text, lineage_of(req, req.artifact_text).lineage)
        try:
            artifact = self._artifact(req)
        except ApplicationError as exc:
            if exc.type != ARTIFACT_REFUSED:
                raise
            # A file Vicar may not read: an ask that its inline text shows still names
            # itself; else the person decides, told why (no rule answers unread).
            said = verdict(inp.control, req, req.artifact_text, lineage_of(req, req.artifact_text).lineage)
            if said is not None and said.escalate:
                return said
            return Verdict(
                escalate=True, reason=f"proxy unavailable: {ARTIFACT_REFUSED}: {exc.message}", guard=PROXY_ERROR
            )
        return verdict(inp.control, req, artifact, lineage_of(req, artifact).lineage)

    @activity.defn(name=c.KEEP_CONTROL)
    @store_errors
    def keep_control(self, inp: c.ControlKeep) -> bool:
        return keep_control(self.registry.get(inp.principal).store, inp.control)

    @activity.defn(name=c.LOAD_CONTROL)
    @store_errors
    def load_control(self, inp: c.CounterInput) -> Control | None:
        try:
            return kept_control(self.registry.get(inp.principal).store)
        except ValueError as exc:  # a person must look at it: retrying reads the same
            raise ApplicationError(str(exc), type=STORE_UNAVAILABLE, non_retryable=True) from None
