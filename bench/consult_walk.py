"""A consult's walk: how often a reader following one `consult` activity from the
activity to the decision leaves a module of Vicar's and comes back to it (issue 35's
"rooms").

The reader reads each of Vicar's functions once, in the order the consult first calls
it; a *stay* is a run of consecutive functions in one module, a *room* a distinct
module, and a *return* a stay in a room already visited (returns = stays - rooms).
Library code (pydantic, numpy, chromadb, sqlite) is not a room. The autonomy rule's
computations are counted too (calls of `rule_in_force`, however many times it runs).

    python -m bench.consult_walk [--answers 250] [--floor] [--stays]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import vicar
from vicar.activities.proxy import ProxyActivities
from vicar.memory.embedder import default_embedder
from vicar.memory.registry import MemoryRegistry
from vicar.models import Action, AnsweredBy, GateRequest, OutcomeRecord, PassResult
from vicar.proxy.learned_store import LearnedModels
from vicar.proxy.outcomes import record_outcome
from vicar.settings import Settings

# The tree whose `vicar` is imported (the repository, or a pinned copy on PYTHONPATH):
# a module's room is its path there, memory/, workflows/ and activities/ as they stand.
ROOT = Path(vicar.__file__).resolve().parents[1]
SKIP = ("site-packages", "/lib/python3", "<")  # libraries, and code pydantic generates
# The functions that compute the autonomy rule in force (counted per consult).
RULE_FUNCTIONS = ("rule_in_force",)


def room(filename: str, floor: bool) -> str | None:
    if any(s in filename for s in SKIP):
        return None
    try:
        where = str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return None
    # The memory is the ground floor, read like a library unless asked (--floor).
    return where if floor or not where.startswith("memory/") else None


class Walk:
    def __init__(self, floor: bool) -> None:
        self.floor = floor
        self.stays: list[str] = []
        self.functions: list[list[str]] = []  # the functions first read in each stay
        self.rule_calls = 0
        self.read: set = set()

    def step(self, where: str | None, function: str) -> None:
        if where is None:
            return
        if not self.stays or self.stays[-1] != where:
            self.stays.append(where)
            self.functions.append([])
        self.functions[-1].append(function)

    def profile(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code.co_name in RULE_FUNCTIONS:
                self.rule_calls += 1
            if code in self.read or code.co_name.startswith("<"):
                # A reader reads a function once, however often it runs, and its
                # comprehensions and lambdas with it.
                return
            self.read.add(code)
            self.step(room(code.co_filename, self.floor), code.co_qualname)

    def lines(self) -> list[str]:
        """Each stay, marked `back` when it returns, with the functions first read there."""
        seen: set[str] = set()
        out = []
        for where, functions in zip(self.stays, self.functions, strict=True):
            out.append(f"{'back' if where in seen else '    '} {where}: {', '.join(functions)}")
            seen.add(where)
        return out

    def report(self) -> dict:
        rooms = Counter(self.stays)
        return {
            "stays": len(self.stays),
            "rooms": len(rooms),
            "returns": len(self.stays) - len(rooms),
            "rule computations": self.rule_calls,
            "most entered": rooms.most_common(6),
        }


def request(i: int, principal: str = "walker") -> GateRequest:
    return GateRequest(
        principal=principal,
        gate_id=f"walk-{i}",
        state="WORK_ASSERT",
        task_type="docs",
        question="Approve this documentation change?",
        artifact_text=f"docs: fix typo number {i} in README",
        upstream_agent="writer-bot",
    )


def measure(answers: int = 250, floor: bool = False) -> Walk:
    """The walk of one consult after `answers` human answers (the first, warming consult
    not counted)."""
    from vicar import contracts as c

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "vicar")
        embedder = default_embedder()
        registry = MemoryRegistry(settings.principals_dir, lambda: embedder, settings.memory)
        # The shipped default predictor (the learned model, the memory vote until its first fit).
        acts = ProxyActivities(None, registry, LearnedModels(registry, settings.predictor), settings)  # type: ignore[arg-type, abstract]
        memory = registry.get("walker")
        guess = PassResult(prose="", confidence=0.9, action=Action.approve)
        for i in range(1, answers + 1):
            req = request(i)
            record_outcome(
                memory,
                OutcomeRecord(
                    request=req,
                    n=i,
                    workflow_id=f"vicar-gate/{req.gate_id}",
                    action=Action.approve,
                    response_text="Fine.",
                    answered_by=AnsweredBy.human,
                    prior=guess,
                    posterior=guess,
                ),
                artifacts=False,
            )
            memory.raise_counter(i)
        n = answers + 1
        inp = c.ConsultInput(
            request=request(n),
            n=n,
            now=datetime.now(UTC),
            gate_key=f"vicar-gate/walk-{n}",
            model=acts.pin_model("walker"),  # what the gate pins under its turn, first
        )
        acts.consult(inp)  # warm: caches and lazy imports are not the walk
        walk = Walk(floor)
        inp = inp.model_copy(
            update={
                "request": request(n + 1),
                "n": n + 1,
                "gate_key": f"vicar-gate/walk-{n + 1}",
                "model": acts.pin_model("walker"),
            }
        )
        sys.setprofile(walk.profile)
        try:
            acts.consult(inp)
        finally:
            sys.setprofile(None)
        registry.close()
    return walk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=250, help="human answers recorded before the traced consult")
    ap.add_argument("--floor", action="store_true", help="count the memory's modules (memory/) as rooms too")
    ap.add_argument("--stays", action="store_true", help="print each stay, with the functions first read there")
    args = ap.parse_args()
    walk = measure(args.answers, args.floor)
    if args.stays:
        print("\n".join(walk.lines()))
    for k, v in walk.report().items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
