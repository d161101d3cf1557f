"""The documentation builds with no broken link, and the README stays an entrance.

`mkdocs build --strict` turns every warning (a missing page, a link to nothing, an unknown
anchor) into an error, so running it here makes CI fail on a broken link."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (and MkDocs' toc for these plain headings)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.*)$", text, flags=re.M)}


def test_the_docs_build_strict(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "WARNING" not in built.stderr, built.stderr[-3000:]
    # Every page is reachable from the navigation, the design documents included.
    for page in (
        "concepts",
        "orchestrator",
        "reviewer",
        "configuration",
        "operations",
        "evaluation",
        "design-decisions",
        "design/approval-gate-and-proxy",
    ):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_the_readme_is_an_entrance():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines > {README_MAX_LINES}: move text to docs/"
    assert "## Quick start" in lines[:40], "the Quick start is near the top"


def test_every_relative_link_in_the_readme_resolves():
    readme = ROOT / "README.md"
    links = [t for t in LINK.findall(readme.read_text()) if not re.match(r"[a-z]+:", t)]
    assert links, "the README links to the guides"
    broken = []
    for target in links:
        file, _, anchor = target.partition("#")
        path = (readme.parent / file).resolve() if file else readme
        if not path.exists() or ROOT not in path.parents and path != ROOT:
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"README.md links to nothing: {broken}"


def cited_text(path: Path) -> str:
    """The prose of a file that may cite a document: all of a Markdown or config file; of
    Python, comments and docstrings, and every string of the shipped code (test data such
    as a diff's `a/docs/guide.md` is not a citation)."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return text
    shipped = path.relative_to(ROOT).parts[0] in ("vicar", "memory", "workflows", "activities")
    parts = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
        elif tok.type == tokenize.STRING and (shipped or tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))):
            parts.append(tok.string)
    return "\n".join(parts)


def test_the_documents_cited_are_in_the_repository():
    """A design document is cited by its path under docs/design/, and every docs/ page the
    code or the other documents cite exists."""
    design = {p.name for p in (ROOT / "docs" / "design").glob("*.md")}
    assert {
        "approval-gate-and-proxy.md",
        "act-r-proxy-memory.md",
        "agent-trust-memory.md",
        "memory-types.md",
        "retrieval-pipelines-addendum.md",
    } <= design
    bare = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(n) for n in sorted(design)) + r")")
    cited = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md\b")
    problems = []
    for folder in ("vicar", "memory", "workflows", "activities", "tests", "bench", "deploy"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".md", ".toml", ".yaml", ".yml") or "__pycache__" in path.parts:
                continue
            if path == Path(__file__).resolve():
                continue  # names the design documents to check them
            text, rel = cited_text(path), path.relative_to(ROOT)
            problems += [f"{rel}: {m} (cite docs/design/{m})" for m in bare.findall(text)]
            problems += [f"{rel}: {m} does not exist" for m in cited.findall(text) if not (ROOT / m).is_file()]
    assert not problems, "\n".join(problems)
