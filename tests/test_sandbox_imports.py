"""The workflow sandbox re-imports a workflow's module, and its parent packages, for every
run. `vicar` is then a fresh package inside the sandbox, and `from vicar import contracts`
(a submodule through its package's attribute) is resolved by Python's own import
machinery, not the sandbox's pass-through: vicar.contracts and everything it imports ran
again for every gate (36% of the worker's CPU in a py-spy profile, gate p50 128 -> 176 ms).
`import vicar.contracts as c` is passed through. This keeps the cheap form."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"vicar", "vicar.workflows", "vicar.workflows.gate", "vicar.memory", "vicar.proxy"}


def test_workflow_modules_never_import_a_submodule_from_its_package():
    offenders = []
    for path in sorted((ROOT / "workflows").rglob("*.py")) + [ROOT / "bench" / "floor_workflow.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in PACKAGES:
                offenders.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import "
                    + ", ".join(a.name for a in node.names)
                )
    assert offenders == [], "use `import vicar.x as x` in workflow modules:\n" + "\n".join(offenders)
