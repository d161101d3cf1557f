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
    for module in (
        "vicar/memory/store.py",
        "vicar/workflows/gate.py",
        "vicar/activities/proxy.py",
        "vicar/worker.py",
        "vicar/client/gates.py",
        "vicar/cli/__init__.py",
        "vicar/cli/gates_cmd.py",
    ):
        assert module in names


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
