"""All of bench/, bench/score/ included, reaches the product the way a user would (issue 35
item 8): no sys.path edits, no private product names. bench/score/ runs its research
against a pinned copy of the product by running *in* that copy (bench/score/pin_product.sh),
never by putting it on sys.path from inside a bench; tests/test_bench_package.py holds the
checks and the rest of bench/'s rules."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_bench_package import private_uses, sys_path_edits

ROOT = Path(__file__).resolve().parents[1]
SCORE = ROOT / "bench" / "score"


def every_bench_module() -> list[Path]:
    return sorted((ROOT / "bench").rglob("*.py"))


def offenders(check) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in every_bench_module()
        for line, what in check(ast.parse(path.read_text(encoding="utf-8")))
    ]


def test_bench_score_is_scanned():
    names = {p.relative_to(ROOT).as_posix() for p in every_bench_module()}
    assert {"bench/score/common.py", "bench/score/simulate.py", "bench/score/measure.py"} <= names


def test_no_sys_path_edit_anywhere_in_bench():
    found = offenders(sys_path_edits)
    assert found == [], "run as `python -m bench.<name>` (score: see pin_product.sh):\n" + "\n".join(found)


def test_no_private_product_name_anywhere_in_bench():
    found = offenders(private_uses)
    assert found == [], "use a public name of the product:\n" + "\n".join(found)


PINNED = "2be538f"  # the tree bench/score/data's dumps came from; it still has vicar.proxy.sequential


def test_a_score_bench_runs_against_the_pinned_product(tmp_path):
    """pin_product.sh runs the bench with the pinned tree's `vicar`, not the working tree's:
    simulate imports vicar.proxy.sequential, which only the pinned tree has. And no bench
    reads SCORE_PRODUCT to edit the path itself any more."""
    assert not [p for p in SCORE.glob("*.py") if "SCORE_PRODUCT" in p.read_text(encoding="utf-8")]
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{PINNED}^{{commit}}"]).returncode:
        pytest.skip(f"{PINNED} is not in this clone (shallow)")
    env = {**os.environ, "PYTHON": sys.executable}
    run = [sys.executable, "-m", "bench.score.simulate", "--help"]
    here = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert here.returncode != 0 and "sequential" in here.stderr  # the working tree's vicar
    pinned = subprocess.run(
        ["sh", str(SCORE / "pin_product.sh"), PINNED, str(tmp_path / "product"), *run[2:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pinned.returncode == 0 and pinned.stdout.startswith("usage:"), pinned.stderr[-2000:]
