"""The workflow sandbox re-imports a workflow's module for every run: without bytecode
it compiles the source each time. The worker compiles the workflows package once, into
a cache of its own when the interpreter writes none (PYTHONDONTWRITEBYTECODE)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import importlib.util, sys
from pathlib import Path
from vicar import workflows
from vicar.runtime.bytecode import compile_package, _fresh
pkg = Path(workflows.__file__).parent
n = compile_package(pkg, Path(sys.argv[1]))
gate = pkg / "gate" / "workflow.py"
cached = Path(importlib.util.cache_from_source(str(gate)))
print(n, sys.pycache_prefix, cached.is_relative_to(Path(sys.argv[1])), _fresh(gate))
"""


def test_the_worker_compiles_its_workflows_outside_the_source_tree(tmp_path):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "pycache")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert int(out[0]) >= 5 and out[1] == str(tmp_path / "pycache")
    assert out[2:] == ["True", "True"]  # the loader will find fresh bytecode for gate/workflow.py there
    # A second worker finds it fresh and compiles nothing.
    again = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE.replace("n = compile_package", "sys.pycache_prefix = sys.argv[1]\nn = compile_package"),
            str(tmp_path / "pycache"),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert again[0] == "0" and again[3] == "True"
