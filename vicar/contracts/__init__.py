"""The workflows' contracts: one module per workflow (brain, gate, session,
consolidation, move, audit) with its names, id, payloads and activity options, and
here the registries computed from them. Names are in history, so renaming one breaks
running workflows.

Everything is re-exported here: `import vicar.contracts as c` then `c.GATE_WORKFLOW`,
`c.ConsultInput`. Workflows import it that way under `imports_passed_through` (the
sandbox then reuses the loaded package), so it stays light: pydantic models and the
SDK's RetryPolicy, nothing that computes."""

from __future__ import annotations

from vicar.contracts.audit import *  # noqa: F403
from vicar.contracts.audit import AUDIT_HANDLES, REVIEW_HANDLES
from vicar.contracts.brain import *  # noqa: F403
from vicar.contracts.brain import BRAIN_HANDLES
from vicar.contracts.consolidation import *  # noqa: F403
from vicar.contracts.consolidation import CONSOLIDATION_HANDLES
from vicar.contracts.gate import *  # noqa: F403
from vicar.contracts.gate import GATE_HANDLES
from vicar.contracts.handles import Handles, unique
from vicar.contracts.move import *  # noqa: F403
from vicar.contracts.move import MOVE_HANDLES
from vicar.contracts.session import *  # noqa: F403
from vicar.contracts.session import SESSION_HANDLES

HANDLES: tuple[Handles, ...] = (
    BRAIN_HANDLES,
    GATE_HANDLES,
    MOVE_HANDLES,
    SESSION_HANDLES,
    CONSOLIDATION_HANDLES,
    AUDIT_HANDLES,
    REVIEW_HANDLES,
)
WORKFLOW_NAMES = unique(h.workflow for h in HANDLES)
SIGNALS = unique(s for h in HANDLES for s in h.signals)
UPDATES = unique(u for h in HANDLES for u in h.updates)
QUERIES = unique(q for h in HANDLES for q in h.queries)
# The patch ids workflow code branches on (workflow.patched): none since the protocol
# baseline. docs/development.md says how a change is versioned from here on.
PATCH_IDS = unique(p for h in HANDLES for p in h.patches)
