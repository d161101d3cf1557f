"""How often Vicar's default rules (vicar/models/default_rules.py) ask about routine work:
their false alarms on the gate-replay and permission datasets' artifacts and on the
routine command lines of tests/fixtures, and their hits on the destructive ones.

    python -m bench.default_rules_alarms [--data DIR ...] [--examples 3]

Every gate of those datasets is routine work that a person answered (a patch, a topic
branch, a data-sharing request): a default rule that fires there asks the person about a
gate that cannot destroy anything itself. A patch that adds `rm -f` to a Makefile is
counted as a false alarm here, though a person might want to be asked about it.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from vicar.eval.dataset import load_events
from vicar.models import GateRequest
from vicar.models.control import Control
from vicar.proxy.lineage import lineage_of
from vicar.proxy.rules import verdict

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
DATASETS = [
    SHARED / "gate-replay" / "dev" / "git-whats-cooking.jsonl.gz",
    SHARED / "gate-replay" / "dev" / "lkml-hwmon.jsonl.gz",
    SHARED / "permissions" / "dev.jsonl.gz",
]
COMMANDS = ROOT / "tests" / "fixtures" / "commands"


def asked_by(request: GateRequest) -> str | None:
    v = verdict(Control(), request, request.artifact_text, lineage_of(request).lineage)
    return v.rule.name if v is not None and v.escalate and v.rule is not None else None


def command_gate(command: str) -> GateRequest:
    from vicar.hooks.tool_call import gate_request
    from vicar.settings import Settings

    call = {
        "session_id": "s",
        "cwd": "/p",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "t",
    }
    return gate_request(call, Settings(), "bench")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, nargs="*", default=DATASETS)
    ap.add_argument("--examples", type=int, default=3, help="gate ids shown per rule that fired")
    args = ap.parse_args()
    print("| source | gates | asked by a default rule | share | by rule |")
    print("|---|---|---|---|---|")
    for path in args.data:
        t0 = time.perf_counter()
        events = [e for es in load_events([path]).values() for e in es]
        fired: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        for e in events:
            name = asked_by(e.request("bench"))
            if name:
                fired[name] += 1
                examples.setdefault(name, []).append(e.gate_id)
        total = sum(fired.values())
        by = ", ".join(f"{n.removeprefix('default-')} {c}" for n, c in fired.most_common()) or "none"
        print(f"| {path.name} | {len(events)} | {total} | {total / max(len(events), 1):.2%} | {by} |")
        for name, ids in examples.items():
            print(f"|  | e.g. {name} |  |  | {', '.join(ids[: args.examples])} |")
        print(f"<!-- {path.name}: {time.perf_counter() - t0:.1f} s -->")
    for label in ("routine", "destructive"):
        lines = [c for c in (COMMANDS / f"{label}.txt").read_text().splitlines() if c.strip()]
        hits = [c for c in lines if asked_by(command_gate(c))]
        print(f"| tests/fixtures/commands/{label}.txt | {len(lines)} | {len(hits)} | {len(hits) / len(lines):.2%} |  |")


if __name__ == "__main__":
    main()
