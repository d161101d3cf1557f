"""The activity that matches the human's rules against a gate where its artifact is read
(the rules handed over with the turn; vicar/proxy/rules.py matches). A mixin of
ProxyActivities: it uses the worker's settings (artifact roots and byte cap).

Read-only, so idempotent. A path that cannot be read fails it non-retryably: the gate
then asks the human (a rule must not be skipped for want of the artifact)."""

from __future__ import annotations

from temporalio import activity

from vicar import contracts as c
from vicar.control_models import Verdict
from vicar.proxy.lineage import lineage_of
from vicar.proxy.rules import needs_artifact, verdict


class RuleActivities:
    def _artifact(self, request) -> str:  # ProxyActivities._artifact
        raise NotImplementedError

    @activity.defn(name=c.MATCH_RULES)
    def match_rules(self, inp: c.RulesInput) -> Verdict | None:
        artifact = self._artifact(inp.request) if needs_artifact(inp.control) else inp.request.artifact_text
        return verdict(inp.control, inp.request, artifact, lineage_of(inp.request, artifact).lineage)
