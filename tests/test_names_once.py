"""Each name Temporal keeps in history or visibility is defined once in the source: the
workflow names, signal, update and query names and patch ids (vicar/contracts/), the
ApplicationError types (vicar/errors.py) and the search attributes
(workflows/search_attributes.py). Everywhere else refers to the constant, so a rename is
one edit and a typo is an import error, not a signal nobody handles."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from temporalio.workflow import _Definition

from vicar import contracts as c
from vicar import errors
from vicar.worker import WORKFLOWS
from vicar.workflows import search_attributes as sa

ROOT = Path(__file__).resolve().parent.parent
# memory/ is the ground floor: its chunks have a "human_response" field, nothing Temporal names.
SOURCE_DIRS = ("vicar", "workflows", "activities")
NAMES = {
    "workflow name": c.WORKFLOW_NAMES,
    "signal": c.SIGNALS,
    "update": c.UPDATES,
    "query": c.QUERIES,
    "patch id": c.PATCH_IDS,
    "error type": errors.ERROR_TYPES,
    "search attribute": tuple(k.name for k in sa.ALL),
}
# Calls whose first argument is a signal, update, query or patch name.
NAME_CALLS = {
    "signal",
    "query",
    "execute_update",
    "start_update",
    "execute_update_with_start_workflow",
    "patched",
    "deprecate_patch",
    "for_keyword",
    "for_float",
    "for_int",
    "for_text",
    "for_bool",
}
HANDLER_DECORATORS = {"signal", "update", "query"}


def _sources() -> list[Path]:
    files = [ROOT / "worker.py"]
    for d in SOURCE_DIRS:
        files += [p for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts]
    return [p for p in files if p.is_file()]


def _trees() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in _sources()]


TREES = _trees()


def _literals() -> Counter:
    """How often each string constant occurs across the source (docstrings aside)."""
    docstrings = set()
    for _, tree in TREES:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    docstrings.add(id(body[0].value))
    return Counter(
        node.value
        for _, tree in TREES
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    )


LITERALS = _literals()


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_each_name_is_written_once(kind):
    names = NAMES[kind]
    assert names or kind == "patch id", kind  # no patch since the protocol baseline (docs/development.md)
    twice = {n: LITERALS[n] for n in names if LITERALS[n] != 1}
    # Generic words (a query named "status", a signal named "end") also occur as
    # unrelated strings; those are checked at every call site below instead.
    twice = {
        n: k
        for n, k in twice.items()
        if not (k > 1 and n in {c.BRAIN_STATUS_QUERY, c.END_SIGNAL, c.JOIN_UPDATE, c.DETAILS_QUERY, c.SUMMARY_QUERY})
    }
    assert not twice, f"{kind}s written as a literal other than once: {twice}"


def test_no_call_site_writes_a_name_by_hand():
    """Signals sent, queries asked, updates executed, patches checked, error types raised,
    handlers declared: by constant, never a bare string."""
    found = []
    for path, tree in TREES:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                attr = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                args = list(node.args[:1]) if attr in NAME_CALLS else []
                args += [k.value for k in node.keywords if k.arg in ("start_signal",)]
                if attr == "ApplicationError":
                    args += [k.value for k in node.keywords if k.arg == "type"]
                on_workflow = isinstance(fn, ast.Attribute) and getattr(fn.value, "id", "") == "workflow"
                if attr in HANDLER_DECORATORS and on_workflow:
                    args += [k.value for k in node.keywords if k.arg == "name"]
                for a in args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        if path.name == "search_attributes.py" and attr.startswith("for_"):
                            continue  # where the search attributes are defined
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {attr}({a.value!r})")
    assert not found, "\n".join(found)


def test_every_handler_is_declared_with_a_named_constant():
    """A bare @workflow.signal takes the method's name: each handler names its constant."""
    bare = []
    for path, tree in TREES:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    if (
                        isinstance(d, ast.Attribute)
                        and d.attr in HANDLER_DECORATORS
                        and getattr(d.value, "id", "") == "workflow"
                    ):
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert not bare, "\n".join(bare)


def test_the_workflows_handle_exactly_the_declared_names():
    defs = [_Definition.from_class(w) for w in WORKFLOWS]
    assert {d.name for d in defs} == set(c.WORKFLOW_NAMES)
    assert {n for d in defs for n in d.signals} == set(c.SIGNALS)
    assert {n for d in defs for n in d.updates} == set(c.UPDATES)
    assert {n for d in defs for n in d.queries} == set(c.QUERIES)
    for kind, names in NAMES.items():
        assert len(set(names)) == len(names), f"a {kind} listed twice: {names}"
