"""Targets the person chooses per context: a `target` rule (vicar/models/control.py), e.g.
10% on docs, 1% on database migrations (docs/rules.md, docs/autonomy-bound.md).

Each target rule has its own bound, valid the way the pooled one is: the same betting
rule (one bet per score threshold, fixed sequences, inverse-probability weights) over
the draws of the gates that rule matches, in outcome order. Which draws a rule speaks for
is decided by the gates' requests (state, task type, agent, paths, lineage, words in the
question and the inline artifact), never by a label, so the rule's wealth is a
nonnegative supermartingale under "its gates' error >= its target" like the pooled one,
and its statement is valid whenever read. The rule's evidence is every gate it matches,
before it was written too.

The safe reading: both bounds must hold. A gate a target rule matches may be answered
alone only at a score where the pooled rule has proven its threshold AND the target
rule has proven its own at its target; a tighter target can only take autonomy away,
never grant what the pooled rule refused. The person's other rules and pauses come
first (vicar/proxy/rules.py: a target rule never decides a gate itself).
"""

from __future__ import annotations

import json

from vicar.memory.store import RecordStore
from vicar.models import AutonomyRule, GateRequest
from vicar.models.control import Control, Effect, Rule
from vicar.proxy.autonomy.ledger import PairLedger, rule_draws

# What a draw's gate is matched on: its request as the outcome log holds it. An
# autonomy_pairs row of a regret (a wrong answer alone found by a later gate) is logged
# with that later gate's outcome, so its own request is not at hand: it is matched on
# its context alone (state, task type, agent), and only by a rule with no other condition.


def target_rules(control: Control | None) -> list[Rule]:
    return [r for r in control.rules if r.effect is Effect.target] if control else []


def rule_key(rule: Rule) -> str:
    """A target rule as its evidence depends on it (a changed rule is a new ledger)."""
    return rule.model_dump_json(exclude={"author", "created", "text"})


def matches_request(rule: Rule, request: GateRequest) -> bool:
    """Whether a target rule matches a gate, on what the gate's record keeps: words and the
    regex look at the question and the inline artifact text (a path's contents are not kept)."""
    from vicar.proxy.lineage import lineage_of
    from vicar.proxy.rules import matches

    artifact = request.artifact_text
    return matches(rule, request, artifact, lineage_of(request, artifact).lineage)


def _matches_context(rule: Rule, state: str, task_type: str, agent: str | None) -> bool:
    if rule.lineages or rule.paths or rule.words or rule.regex:
        return False
    return (
        (not rule.states or state in {s.value for s in rule.states})
        and (not rule.task_types or task_type in rule.task_types)
        and (not rule.upstream_agents or agent in rule.upstream_agents)
    )


class TargetLedger(PairLedger):
    """The betting rule at a target rule's target over the draws of the gates it matches."""

    def __init__(self, rule: Rule, delta: float, weighted: bool = True) -> None:
        assert rule.target is not None
        super().__init__(rule.target, delta, weighted)
        self.target_rule = rule
        self.matched = 0  # draws of gates it matches, labelled or not

    def update(self, store: RecordStore, kind: str) -> None:
        draws = rule_draws(store, kind, self.last_pair, self.last_alone)
        if not draws:
            return
        requests, regrets = _gates_of(store, draws)
        for d in draws:
            if d.pair_seq is not None:
                self.last_pair = max(self.last_pair, d.pair_seq)
            else:
                assert d.alone_seq is not None
                self.last_alone = max(self.last_alone, d.alone_seq)
            if d.pair_seq in regrets:
                hit = _matches_context(self.target_rule, *regrets[d.pair_seq])
            else:
                req = requests.get(d.outcome_seq)
                hit = req is not None and matches_request(self.target_rule, req)
            if not hit:
                continue
            self.matched += 1
            if d.pair_seq is not None:
                self.add(d.score, d.wrong, d.weight if self.weighted else 1.0)
            elif self.weighted:
                self.add(d.score, False, d.weight, labelled=False)


def _gates_of(store: RecordStore, draws) -> tuple[dict[int, GateRequest], dict[int, tuple[str, str, str | None]]]:
    """The requests of the draws' outcomes, and the context of each regret pair."""
    seqs = sorted({d.outcome_seq for d in draws})
    pair_seqs = [d.pair_seq for d in draws if d.pair_seq is not None]
    requests: dict[int, GateRequest] = {}
    regrets: dict[int, tuple[str, str, str | None]] = {}
    with store.reading() as db:
        for i in range(0, len(seqs), 500):
            chunk = seqs[i : i + 500]
            marks = ", ".join("?" * len(chunk))
            for seq, raw in db.execute(f"SELECT seq, record FROM outcomes WHERE seq IN ({marks})", chunk):
                try:
                    requests[seq] = GateRequest.model_validate(json.loads(raw)["request"])
                except (ValueError, KeyError):
                    # A record this model no longer reads speaks for no target rule (chosen
                    # by its form, never its label: the bets stay valid).
                    continue
        for i in range(0, len(pair_seqs), 500):
            chunk = pair_seqs[i : i + 500]
            marks = ", ".join("?" * len(chunk))
            rows = db.execute(
                "SELECT seq, state, task_type, agent FROM autonomy_pairs"
                f" WHERE regret_of IS NOT NULL AND seq IN ({marks})",
                chunk,
            )
            for seq, state, task_type, agent in rows:
                regrets[seq] = (state, task_type, agent)
    return requests, regrets


def with_targets(pooled: AutonomyRule, own: list[tuple[Rule, AutonomyRule]]) -> AutonomyRule:
    """The rule a gate is under when target rules match it: both bounds must hold. No
    threshold where one of them proves none (the reason names the rule); else the
    highest threshold, stated with the numbers of the bound that sets it."""
    out = pooled
    if pooled.threshold is None:
        return pooled  # nothing to take away
    for rule, r in own:
        if r.threshold is None:
            said = (
                f"target rule {rule.name}: its own bound over the gates it matches is not within its target "
                f"{r.target:g} at {1 - r.delta:.0%} confidence (bound {r.bound:.3f} over {r.evidence} graded "
                f"answers, {r.errors} wrong)"
            )
            return out.model_copy(update={"threshold": None, "withdrawn": said, "withdrawn_seq": 0})
        if out.threshold is not None and r.threshold > out.threshold:
            out = r.model_copy(update={"audit_share": pooled.audit_share})
    return out
