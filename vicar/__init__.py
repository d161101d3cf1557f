"""Vicar: a human proxy for approval gates.

The public API, for an orchestrator or a tool written in Python:

    import vicar
    client = await vicar.connect(settings)              # Temporal, with Vicar's payload codec
    handle = await vicar.open_gate(client, vicar.GateRequest(...))
    result = await handle.result(timeout=600)

Every name in `__all__` is imported when first used (PEP 562), so `import vicar` stays
light and the memory's ground floor (`vicar.memory`) never loads the client. Anything not
listed here is internal and may change between releases.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # the client (docs/orchestrator.md)
    **dict.fromkeys(
        (
            "GateHandle",
            "open_gate",
            "get_gate",
            "answer",
            "list_escalations",
            "gate_view",
            "add_rule",
            "remove_rule",
            "get_control",
            "pause",
            "resume",
        ),
        "vicar.client",
    ),
    # the boundary models
    **dict.fromkeys(
        ("GateRequest", "GateResult", "GateDetails", "HumanAnswer", "Action", "CfAState", "EscalationMode"),
        "vicar.models",
    ),
    **dict.fromkeys(("Rule", "Control"), "vicar.models.control"),
    "GateView": "vicar.models.view",
    # reaching Temporal
    "connect": "vicar.runtime.connect",
    "data_converter": "vicar.runtime.codec",
    # errors: each carries the CLI's exit code
    **dict.fromkeys(
        ("VicarError", "InvalidInput", "NotFound", "Conflict", "NotResponding", "Unreachable"), "vicar.errors"
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vicar' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
