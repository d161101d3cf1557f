"""The house's plan: `memory/` is the ground floor and imports nothing else of Vicar
(its own types, parameters and errors live in it); `vicar/proxy/` reasons, and knows
nothing of Temporal, the activities or the workflows that carry it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (lazy imports inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def offenders(folder: str, allowed: tuple[str, ...], banned: tuple[str, ...]) -> list[str]:
    out = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, module in imported_modules(path):
            inside = module == "vicar" or module.startswith("vicar.")
            if (inside and not module.startswith(allowed)) or module.startswith(banned):
                out.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    return out


def test_the_memory_imports_nothing_of_vicar_above_it():
    assert offenders("memory", allowed=("vicar.memory",), banned=("temporalio",)) == []


def test_the_proxy_knows_nothing_of_temporal_or_what_carries_it():
    banned = ("temporalio", "vicar.activities", "vicar.workflows", "vicar.worker", "vicar.cli")
    assert offenders("vicar/proxy", allowed=("vicar",), banned=banned) == []


def test_importing_every_memory_module_loads_no_other_part_of_vicar():
    modules = sorted(f"vicar.memory.{p.stem}" for p in (ROOT / "memory").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(' '.join(sorted(m for m in sys.modules if m.startswith('vicar.')"
        " and not m.startswith('vicar.memory'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert len(modules) > 15 and loaded.stdout.split() == []


# Where each installed package's files are (pyproject's package-dir mapping).
PACKAGE_ROOTS = {
    "vicar": "vicar",
    "vicar.memory": "memory",
    "vicar.workflows": "workflows",
    "vicar.activities": "activities",
}


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGE_ROOTS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def test_no_import_circles():
    """Not even through a function-level import (which hid one in the store's errors)."""
    import graphlib

    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {owner(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                if node.level:
                    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + [node.module])
                # `from package import submodule` depends on the submodule, else on the module.
                targets |= {
                    owner(f"{base}.{a.name}") if f"{base}.{a.name}" in modules else owner(base) for a in node.names
                }
        graph[name] = {t for t in targets if t and t != name}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None
