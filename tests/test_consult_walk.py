"""Issue 35's goal for a consult, kept: following one `consult` activity of the shipped
default predictor (the learned model, fitted) from the activity to the decision, a reader
comes back to a module at most 12 times, and the autonomy rule is computed once
(bench/consult_walk.py; figures in bench/CONSULT_WALK.md)."""

from __future__ import annotations

from bench.consult_walk import measure

MOST_RETURNS = 12


def test_a_consult_walks_in_order_and_computes_the_rule_once():
    walk = measure(answers=250)
    report = walk.report()
    assert report["rule computations"] == 1
    # A walk that reads no module of Vicar's would pass the next line: it must read them.
    assert report["rooms"] >= 20 and "vicar/proxy/learned_model.py" in walk.stays
    assert report["returns"] <= MOST_RETURNS, "the walk, each stay:\n" + "\n".join(walk.lines())
