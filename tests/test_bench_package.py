"""bench/ is a package run as `python -m bench.<name>` from the repository's root, and it
measures the product through names the product makes public (issue 35 item 8). A bench that
edits sys.path runs only from one place and hides which `vicar` it measures; one that
imports a private name breaks when the product tidies its insides, and measures something
the product never promised. bench/score/ pins another copy of the product on purpose and
is left out (its own README)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PRODUCT = "vicar"


def bench_modules() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "score" not in p.relative_to(BENCH).parts[:-1])


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def from_product(module: str | None) -> bool:
    return module is not None and (module == PRODUCT or module.startswith(PRODUCT + "."))


def sys_path_edits(tree: ast.AST) -> list[tuple[int, str]]:
    """Every use of sys.path (reading it is how an edit starts) and `from sys import path`."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            found.append((node.lineno, "from sys import path"))
    return found


def private_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """Private product names a module imports, and private attributes it reads from what it
    imported from the product (a module, a class, an instance made by calling one)."""
    found, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if from_product(a.name):
                    bound.add(a.asname or a.name.split(".")[0])
                    if any(private(part) for part in a.name.split(".")):
                        found.append((node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom) and from_product(node.module):
            assert node.module is not None
            for a in node.names:
                bound.add(a.asname or a.name)
                if private(a.name) or any(private(part) for part in node.module.split(".")):
                    found.append((node.lineno, f"from {node.module} import {a.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute | ast.Call):
                base = base.value if isinstance(base, ast.Attribute) else base.func
            if isinstance(base, ast.Name) and base.id in bound:
                found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in bound
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def neighbours_by_bare_name(tree: ast.AST, stems: set[str]) -> list[tuple[int, str]]:
    """Imports of a bench module by its bare name (`import gate_bench`), which only
    resolve when bench/ itself is on sys.path."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name.split(".")[0] in stems]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in stems:
            found.append((node.lineno, f"from {node.module} import ..."))
    return found


def offenders(check) -> list[str]:
    out = []
    for path in bench_modules():
        for line, what in check(ast.parse(path.read_text(encoding="utf-8"))):
            out.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    return out


def test_the_bench_tree_is_scanned():
    names = {p.relative_to(ROOT).as_posix() for p in bench_modules()}
    assert {"bench/__init__.py", "bench/gate_bench.py", "bench/text_bench.py"} <= names
    assert not any(n.startswith("bench/score/") for n in names)


def test_the_checks_catch_what_they_look_for():
    source = (
        "import sys\nsys.path.insert(0, '..')\n"
        "from vicar.memory.store import _COLUMNS\nfrom vicar.proxy import outcomes\nimport vicar.llm.parse as p\n"
        "from vicar.proxy.offline import OfflinePredictor\n"
        "outcomes._pattern_seq\np._DECOR\nOfflinePredictor()._percepts\ngetattr(outcomes, '_resume_point')\n"
        "import gate_bench\nfrom machine_info import machine_line\nfrom bench.prom import delta\n"
    )
    tree = ast.parse(source)
    assert [line for line, _ in sys_path_edits(tree)] == [2]
    assert [line for line, _ in private_uses(tree)] == [3, 7, 8, 9, 10]
    assert [line for line, _ in neighbours_by_bare_name(tree, {"gate_bench", "machine_info", "prom"})] == [11, 12]


def test_no_bench_edits_sys_path():
    assert offenders(sys_path_edits) == [], "run benches as `python -m bench.<name>` from the repository's root"


def test_no_bench_uses_a_private_product_name():
    found = offenders(private_uses)
    assert found == [], "use a public name, or compute it in the bench:\n" + "\n".join(found)


def test_bench_modules_import_each_other_through_the_package():
    stems = {p.stem for p in BENCH.glob("*.py")} - {"__init__"}
    found = offenders(lambda tree: neighbours_by_bare_name(tree, stems))
    assert found == [], "import a neighbour as `from bench.<name> import ...`:\n" + "\n".join(found)


def scripts() -> list[str]:
    """Bench modules that run (`if __name__ == "__main__"`), as `bench.<name>`."""
    return [
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in bench_modules()
        if '__name__ == "__main__"' in p.read_text(encoding="utf-8")
    ]


def test_every_bench_script_answers_help():
    """`python -m bench.<name> --help` in one interpreter for all (each one costs the
    product's imports, ~2 s, on a shared 2-core machine): runpy is what `-m` runs."""
    names = scripts()
    assert len(names) >= 20
    probe = (
        "import contextlib, io, runpy, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    sys.argv = [name, '--help']\n"
        "    out = io.StringIO()\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(out):\n"
        "            runpy.run_module(name, run_name='__main__', alter_sys=True)\n"
        "        failed.append(f'{name}: --help did not exit')\n"
        "    except SystemExit as exc:\n"
        "        if exc.code not in (0, None) or 'usage:' not in out.getvalue():\n"
        "            failed.append(f'{name}: exit {exc.code!r}, output {out.getvalue()[:200]!r}')\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *names], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "", done.stdout


@pytest.mark.parametrize("name", ["bench.gate_bench", "bench.text_bench"])
def test_a_bench_runs_as_a_module_from_the_root(name):
    """The real `python -m` for two benches whose neighbours used to come from sys.path."""
    done = subprocess.run([sys.executable, "-m", name, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-3000:]
