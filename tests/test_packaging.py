"""Every package of the tree is installed: pyproject lists its packages by hand (the
package-dir mapping puts memory/, workflows/ and activities/ inside vicar), so a new
package left off the list works in an editable install and is missing from the wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_in_the_tree_is_listed_in_pyproject():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    dirs = {name: ROOT / path for name, path in tool.get("package-dir", {}).items() if name}
    dirs.setdefault("vicar", ROOT / "vicar")
    found = set()
    for name, base in dirs.items():
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            found.add(".".join([name, *rel.parts]))
    missing = sorted(p for p in found if p not in listed and "__pycache__" not in p)
    assert len(found) > 10 and missing == []
