"""The house's plan, as a newcomer reads it: product modules say why, not which issue
asked for them (an issue number means nothing to a reader of the installed package)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("vicar", "memory", "workflows", "activities")
TEXT = {".py", ".html", ".js", ".css", ".svg", ".md", ".txt", ".toml", ".json"}
ISSUE_CITED = re.compile(r"\bissues?\s*#?\s*\d+", re.I)


def product_files() -> list[Path]:
    return sorted(
        p for folder in PRODUCT for p in (ROOT / folder).rglob("*") if p.suffix in TEXT and "__pycache__" not in p.parts
    )


def test_no_product_module_cites_an_issue_number():
    files = product_files()
    cited = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ISSUE_CITED.search(line)
    ]
    assert len(files) > 200, "the product's files were not found"
    assert cited == [], "say why, not which issue:\n" + "\n".join(cited)


# -- each workflow's activities: declared once in its contract, implemented once ------------

CONTRACTS = ("gate", "brain", "session", "consolidation", "audit", "move")


def declared() -> dict[str, tuple[str, ...]]:
    """Each contract module's own tuple of its activity names (GATE_ACTIVITIES, ...)."""
    return {w: getattr(importlib.import_module(f"vicar.contracts.{w}"), f"{w.upper()}_ACTIVITIES") for w in CONTRACTS}


def implemented() -> dict[str, list[tuple[str, str]]]:
    """Each activity name defined with @activity.defn in activities/, with where: the class
    (module:Class) whose own body defines it, not one inherited."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((ROOT / "activities").glob("*.py")):
        module = importlib.import_module(f"vicar.activities.{path.stem}")
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for attr in vars(cls).values():
                defn = getattr(attr, "__temporal_activity_definition", None)
                if defn is not None:
                    out.setdefault(defn.name, []).append((path.stem, cls_name))
    return out


def test_every_activity_is_declared_by_one_contract_and_defined_once():
    """The names a worker registers are exactly the names the contracts declare, each in
    the contract module that defines its constant, and each defined by one method."""
    import vicar.contracts as c

    ours = declared()
    names = [n for names in ours.values() for n in names]
    defined = implemented()
    twice = {n: where for n, where in defined.items() if len(where) > 1}
    assert len(defined) > 30 and twice == {}
    assert sorted(names) == sorted(set(names)), "an activity declared by two contracts"
    assert set(names) == set(defined), {
        "declared, not defined": sorted(set(names) - set(defined)),
        "defined, not declared": sorted(set(defined) - set(names)),
    }
    # Declared by the contract module that defines the constant its @activity.defn names.
    constants = {
        kw.value.attr
        for path in (ROOT / "activities").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "defn"
        for kw in node.keywords
        if kw.arg == "name" and isinstance(kw.value, ast.Attribute)
    }
    assert {getattr(c, k) for k in constants} == set(defined)
    for workflow, names in ours.items():
        tree = ast.parse((ROOT / "vicar" / "contracts" / f"{workflow}.py").read_text())
        own = {
            getattr(c, t.id)
            for node in tree.body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name) and t.id in constants
        }
        assert set(names) == own, (workflow, sorted(set(names) ^ own))


# Workflows whose activities are not yet one class of their own. The gate's are in
# ProxyActivities (activities/proxy.py), which also carries the brain's through its bases
# TurnActivities (activities/turns.py) and RuleActivities (activities/rules.py: the gate's
# MATCH_RULES beside the brain's KEEP_CONTROL and LOAD_CONTROL), and in NotifyActivities
# (activities/notify.py: NOTIFY, ARTIFACT_EXCERPTS). Shrink this as they move.
NOT_YET_ONE_CLASS = {"gate", "brain"}


def one_class_mismatch(workflow: str, names: tuple[str, ...], defined: dict[str, list[tuple[str, str]]]) -> str:
    """Why `workflow`'s activities are not one class of activities/<workflow>.py, with no
    base class, that registers exactly the contract's names ('' when they are)."""
    homes = {home for n in names for home in defined.get(n, [])}
    if len(homes) != 1:
        return f"in {len(homes)} classes: {sorted(homes)}"
    module, cls_name = homes.pop()
    if module != workflow:
        return f"in activities/{module}.py, not activities/{workflow}.py"
    cls = getattr(importlib.import_module(f"vicar.activities.{module}"), cls_name)
    if cls.__bases__ != (object,):
        return f"{cls_name} has base classes {[b.__name__ for b in cls.__bases__]}"
    registers = {
        d.name for _, m in inspect.getmembers(cls) if (d := getattr(m, "__temporal_activity_definition", None))
    }
    if registers != set(names):
        return f"{cls_name} registers {sorted(registers ^ set(names))} beyond or short of the contract"
    return ""


def test_each_workflows_activities_are_one_class_with_the_contracts_names():
    defined = implemented()
    found = {w: why for w, names in declared().items() if (why := one_class_mismatch(w, names, defined))}
    # Every workflow not listed holds; a listed one that now holds must leave the list.
    assert set(found) == NOT_YET_ONE_CLASS, found


# -- folders import one another one way ------------------------------------------------

# The folder-level circles not yet broken, each with the edges that close it (shrink as they go):
# - contracts <-> models: vicar/models/chat.py renders the gate's Notice (vicar/contracts/gate.py);
# - runtime, settings, workflows: settings validate with runtime/sharding's MAX_SHARDS and
#   parse_shards, workflows place principals with runtime/sharding, and runtime registers
#   workflows/search_attributes and serves workflows/metrics;
# - proxy <-> proxy/autonomy: they call each other (control_store, lineage one way; the ledger,
#   the rule the other);
# - hooks <-> inbox: the inbox's app serves hooks/http.py's endpoints, which read inbox.web's state.
KNOWN_FOLDER_CIRCLES = {
    frozenset({"vicar/contracts", "vicar/models"}),
    frozenset({"vicar/runtime", "vicar/settings", "workflows"}),
    frozenset({"vicar/proxy", "vicar/proxy/autonomy"}),
    frozenset({"vicar/hooks", "vicar/inbox"}),
}


def room(path: Path) -> str:
    """A module's folder; a module at vicar/'s root is a room of its own (the hall has no one job)."""
    rel = path.relative_to(ROOT)
    return str(rel) if rel.parent == Path("vicar") and rel.name != "__init__.py" else str(rel.parent)


def folder_edges() -> dict[tuple[str, str], list[str]]:
    """(importing folder, imported folder) -> the imports that make the edge, lazy ones and
    those under TYPE_CHECKING included."""
    from tests.test_layers import _modules

    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [
                    owner(f"{base}.{a.name}") if f"{base}.{a.name}" in modules else owner(base) for a in node.names
                ]
            else:
                continue
            for target in {t for t in targets if t and t != name}:
                a, b = room(path), room(modules[target])
                if a != b:
                    edges.setdefault((a, b), []).append(f"{path.relative_to(ROOT)}:{node.lineno} {target}")
    return edges


def circles(edges) -> list[set[str]]:
    """The strongly connected components of more than one folder (Tarjan's)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_folder_import_circles_but_the_known_ones():
    edges = folder_edges()
    found = circles(edges)
    assert len({a for a, _ in edges}) > 20, "the folders were not read"
    detail = {
        " ".join(sorted(c)): sorted(f"{a} -> {b}: {ev[0]}" for (a, b), ev in edges.items() if a in c and b in c)
        for c in found
    }
    # A new circle fails; a known one that is gone must leave KNOWN_FOLDER_CIRCLES.
    assert {frozenset(c) for c in found} == KNOWN_FOLDER_CIRCLES, detail
