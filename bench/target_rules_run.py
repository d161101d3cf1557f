"""A scripted principal through the real autonomy rule (issue 36 items 5 and 6): gates of
three task types whose proxy errs at different rates, each decided by `gate_rule` (the
function a consult calls) and logged by `record_outcome` into a real store, audits drawn
as a gate's are. Then `vicar health` says where the proxy errs, and, with `--target-rule`,
what a 1% target on database migrations takes away.

    python -m bench.target_rules_run --out /tmp/run-a
    python -m bench.target_rules_run --out /tmp/run-b --target-rule
    VICAR_DATA_DIR=/tmp/run-a vicar health alice
"""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

# The proxy's error per task type; wrong answers score lower on average than right ones,
# except where the score knows nothing of the context (its wrong answers score as its right
# ones): the pooled statement can hold while such a context runs above the target.
ERRORS = {"docs": 0.0, "makefile": 0.1, "db-migration": 0.01}
WRONG_SCORES, RIGHT_SCORES = (0.5, 1.0), (0.8, 1.0)
SCORE_BLIND = {"makefile"}
AUDIT_SHARE = 0.2  # more checks than the default 5%, so each context has some within a short run
T0 = datetime(2026, 9, 1, tzinfo=UTC)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="A new data directory (VICAR_DATA_DIR) for the run.")
    ap.add_argument("--gates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--target-rule", action="store_true", help="Add the target rule migrations-1pc (1%%) first.")
    args = ap.parse_args()
    os.environ["VICAR_DATA_DIR"] = str(args.out)

    from vicar.memory.embedder import default_embedder
    from vicar.memory.principal import PrincipalMemory
    from vicar.models import Action, AnsweredBy, Calibration, GateRequest, OutcomeRecord, PassResult
    from vicar.models.control import Control, Rule
    from vicar.proxy.autonomy import gate_rule
    from vicar.proxy.control_store import keep_control
    from vicar.proxy.outcomes import record_outcome
    from vicar.settings import MemoryParams, Settings

    settings = Settings.from_env()
    base = settings.calibration.autonomy.model_copy(update={"audit_share": AUDIT_SHARE})
    memory = PrincipalMemory("alice", settings.principals_dir, default_embedder(), MemoryParams())
    # `vicar health` reads the principal's parameters from here: the same audit share.
    (memory.dir / "autonomy.json").write_text(json.dumps({"audit_share": AUDIT_SHARE}))
    if args.target_rule:
        rule = Rule(name="migrations-1pc", effect="target", target=0.01, author="alice", task_types=["db-migration"])
        keep_control(memory.store, Control(rules=[rule], version=1))
    rng = random.Random(args.seed)
    alone = dict.fromkeys(ERRORS, 0)
    last_reason = ""
    try:
        for i in range(1, args.gates + 1):
            task_type = rng.choice(list(ERRORS))
            wrong = rng.random() < ERRORS[task_type]
            score = rng.uniform(*(WRONG_SCORES if wrong and task_type not in SCORE_BLIND else RIGHT_SCORES))
            req = GateRequest(
                principal="alice", gate_id=f"g{i}", state="WORK_ASSERT", task_type=task_type, question="Merge?"
            )
            wid = f"vicar-gate/g{i}"
            g = gate_rule(memory.store, memory.dir, base, "alice", "gate", "WORK_ASSERT", task_type, wid, request=req)
            lets = g.rule.threshold is not None and score >= g.rule.threshold
            audited = lets and g.draw < base.audit_share
            if g.rule.withdrawn and task_type == "db-migration":
                last_reason = g.rule.withdrawn
            by = AnsweredBy.proxy if lets and not audited else AnsweredBy.human
            alone[task_type] += by is AnsweredBy.proxy
            guard = "audit" if audited else "passthrough" if lets else "unproven"
            record = OutcomeRecord(
                request=req,
                n=i,
                workflow_id=wid,
                action=Action.reject if wrong and by is AnsweredBy.human else Action.approve,
                response_text="",
                answered_by=by,
                at=T0 + timedelta(minutes=i),
                posterior=PassResult(prose="ok", confidence=score, action=Action.approve),
                calibration=Calibration(
                    confidence=score,
                    score=score,
                    guard=guard,
                    threshold=g.rule.threshold,
                    target=g.rule.target,
                    audit_share=base.audit_share,
                ),
            )
            record_outcome(memory, record, artifacts=False)
    finally:
        memory.close()
    print(f"{args.gates} gates, answered alone per task type: {alone}")
    if last_reason:
        print(f"the last migration gate's reason: {last_reason}")


if __name__ == "__main__":
    main()
