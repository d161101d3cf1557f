"""All of bench/, bench/score/ included, reaches the product the way a user would (issue 35
item 8): no sys.path edits, no private product names. bench/score/ runs its research
against a pinned copy of the product by running *in* that copy (bench/score/pin_product.sh),
never by putting it on sys.path from inside a bench; tests/test_bench_package.py holds the
checks and the rest of bench/'s rules."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_the_pinned_product_is_run_from_its_own_tree():
    """The pinning script runs the bench inside the pinned tree with the repository on
    PYTHONPATH (the tree's `vicar` first, then `bench`), and no bench reads SCORE_PRODUCT
    to edit the path itself."""
    script = (SCORE / "pin_product.sh").read_text(encoding="utf-8")
    assert "PYTHONPATH" in script and "python -m" in script
    assert not [p for p in SCORE.glob("*.py") if "SCORE_PRODUCT" in p.read_text(encoding="utf-8")]
