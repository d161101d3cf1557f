"""Loading for the score benches: per-gate replay records joined with the dataset's events.

A replay's records (`bench/replay/gates-<variant>.jsonl.gz`, or this folder's
`data/replay-seed<k>.jsonl.gz` from dump_replay.py, which adds the proposed action)
are per reviewer in `order`; the dataset's events per reviewer in `seq`: the replay
walked them in that order, so row i of a reviewer is event i.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

# The product these benches import is whichever `vicar` the interpreter finds: the working
# tree (python -m bench.score.<name>), or a tree pinned at one commit when run through
# pin_product.sh, which puts that tree first on PYTHONPATH.


def settings():
    """The product's Settings from the environment, wherever the pinned tree keeps it
    (`vicar.config` at 2be538f; the renovation moves it to `vicar.settings`)."""
    import importlib

    for name in ("vicar.config", "vicar.settings"):
        try:
            return importlib.import_module(name).Settings.from_env()
        except (ImportError, AttributeError):
            continue
    raise SystemExit("no vicar Settings found: run the bench against a pinned tree (pin_product.sh)")


REPO = Path(__file__).resolve().parents[2]
DATASET = Path("/work/shared/datasets/gate-replay/dev")
DEFAULT_GATES = REPO / "bench/replay/gates-default.jsonl.gz"
DUMP = REPO / "bench/score/data/replay-seed{seed}.jsonl.gz"
REVIEWERS = ("Junio C Hamano", "Guenter Roeck", "Rob Herring", "Krzysztof Kozlowski")
# The design is chosen on this reviewer only; the other three are held out.
TUNED_ON = "Guenter Roeck"


def load_gates(path: Path) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt") as fh:
        for line in fh:
            g = json.loads(line)
            by[g["reviewer"]].append(g)
    for gs in by.values():
        gs.sort(key=lambda g: g["order"])
    return {r: by[r] for r in sorted(by, key=lambda r: REVIEWERS.index(r) if r in REVIEWERS else 99)}


def load_events(folder: Path = DATASET) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                e = json.loads(line)
                by[e["reviewer"]].append(e)
    for evs in by.values():
        evs.sort(key=lambda e: e["seq"])
    return dict(by)


def joined(gates: dict[str, list[dict]], events: dict[str, list[dict]]) -> dict[str, list[tuple[dict, dict]]]:
    """(gate record, event) per reviewer; checks the two line up."""
    out = {}
    for r, gs in gates.items():
        evs = events[r]
        if len(evs) != len(gs):
            raise SystemExit(f"{r}: {len(gs)} gate records but {len(evs)} events")
        for g, e in zip(gs, evs):
            if g["task_type"] != e["task_type"] or ("actual" in g and g["actual"] != e["action"]):
                raise SystemExit(f"{r}: gate {g['order']} does not match event {e['seq']}")
        out[r] = list(zip(gs, evs))
    return out


def gate_key(event: dict) -> str:
    """The gate id the replay gives an event's gate (its audit draw is keyed by it), as
    the product's public GateEvent makes it."""
    from vicar.eval.dataset import GateEvent

    return GateEvent.model_validate(event).request("replay").gate_id
