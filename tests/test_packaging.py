"""The installed distribution exposes one namespace, `vicar`: an orchestrator's own
`workflows.py` or `memory` package next to it changes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_only_the_vicar_package(tmp_path):
    # Built from a copy of what the image copies: a build/ left in the working tree by an
    # older layout would otherwise be packed again.
    source = tmp_path / "src"
    for name in ("vicar", "memory", "workflows", "activities"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("vicar-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"vicar"}
    # Every module of the tree is in the wheel (a package missing from pyproject's list
    # installs without it: an editable install hides that, an image does not).
    expected = set()
    for top in ("vicar", "memory", "workflows", "activities"):
        for path in (source / top).rglob("*.py"):
            rel = path.relative_to(source / top).as_posix()
            expected.add(f"vicar/{rel}" if top == "vicar" else f"vicar/{top}/{rel}")
    assert not expected - set(names), sorted(expected - set(names))


def test_the_public_api_resolves_and_import_vicar_stays_light():
    code = (
        "import sys, vicar\n"
        "assert 'temporalio' not in sys.modules and 'vicar.client' not in sys.modules\n"
        "missing = [n for n in vicar.__all__ if getattr(vicar, n, None) is None]\n"
        "assert not missing, missing\n"
        "from vicar import open_gate, GateRequest, VicarError\n"
        "print(len(vicar.__all__))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) >= 20


def test_an_orchestrators_own_workflows_module_does_not_shadow_vicar(tmp_path):
    # A Temporal-style project: its own workflows.py, activities.py and memory package.
    (tmp_path / "workflows.py").write_text("raise ImportError('the orchestrator module, not Vicar')\n")
    (tmp_path / "activities.py").write_text("raise ImportError('the orchestrator module, not Vicar')\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "__init__.py").write_text("raise ImportError('the orchestrator package, not Vicar')\n")
    probe = (
        "import vicar.client.gates, vicar.worker, vicar.memory.store, vicar.workflows.gate, vicar.activities.proxy\n"
        "print(vicar.workflows.gate.GateWorkflow.__name__)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "GateWorkflow"
