"""The autonomy rule: the proxy answers alone only where a bound on its error, valid
whenever it is read, is within the person's target (docs/autonomy-bound.md).

- `bets`: the betting confidence sequences (one bet per score threshold against "the
  error is >= target", and the drift test's bet the other way round);
- `ledger`: the rule's evidence (a pair per human-answered gate, a draw per answer alone
  not audited, each weighted by the inverse of its audit probability) and the bets
  over it;
- `drift`: autonomy withdrawn from a context whose audits show its error above target,
  re-earned by the same rule, and which gate announces it;
- `rule`: the rule in force for a gate (parameters, evidence, drift together), computed
  once per consult.

Pure reasoning over a principal's record store: the gate's consult, the replay, `vicar
health` and the demo read the same functions.
"""

from vicar.proxy.autonomy.rule import GateRule, audit_draw, autonomy_params, gate_rule, rule_in_force

__all__ = ["GateRule", "audit_draw", "autonomy_params", "gate_rule", "rule_in_force"]
