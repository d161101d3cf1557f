"""The house's plan, as a newcomer reads it: product modules say why, not which issue
asked for them (an issue number means nothing to a reader of the installed package)."""

from __future__ import annotations

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
