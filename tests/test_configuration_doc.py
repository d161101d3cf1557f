"""Settings have one home: each VICAR_* variable is declared once (vicar/settings_env.py),
read from the environment only there, validated at start, and docs/configuration.md is
generated from the declarations."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from vicar.config import Settings
from vicar.errors import InvalidInput

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
HOME = ROOT / "vicar" / "settings_env.py"
SCANNED = ("vicar", "memory", "activities", "workflows")
VICAR_NAME = re.compile(r"\bVICAR_[A-Z0-9_]*[A-Z0-9]\b")
# Environment reads of names held in a variable that are not Vicar's: the providers'
# keys, by provider, and Temporal's own variables.
NOT_VICAR = {
    ("vicar/proxy/select.py", "KEY_ENV[provider]"),
    ("vicar/proxy/select.py", "KEY_ENV[name]"),
    ("vicar/runtime/server.py", "k"),
}


def _sources(root: Path = ROOT):
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            yield path, path.read_text()


def environment_reads(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, what) for every read of one named variable: os.environ.get/[]/
    setdefault/pop and os.getenv, with the name as written."""
    reads = []
    for path, source in _sources(root):
        for node in ast.walk(ast.parse(source)):
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                owner = ast.unparse(node.func.value)
                if (owner.endswith("environ") and node.func.attr in ("get", "setdefault", "pop")) or (
                    owner == "os" and node.func.attr == "getenv"
                ):
                    target = node.args[0]
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
                target = node.slice
            if target is not None:
                reads.append((str(path.relative_to(root)), cast(ast.expr, node).lineno, ast.unparse(target)))
    return reads


def stray_reads(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """Reads outside the settings home of a VICAR_* name, or of a name held in a
    variable (which could be one)."""
    home = str(HOME.relative_to(ROOT))
    stray = []
    for file, line, what in environment_reads(root):
        literal = what[:1] in "'\""
        if file == home or (literal and not VICAR_NAME.search(what)) or (file, what) in NOT_VICAR:
            continue
        stray.append((file, line, what))
    return stray


def test_each_vicar_variable_is_read_in_one_place():
    assert stray_reads() == []
    home = [r for r in environment_reads() if r[0] == str(HOME.relative_to(ROOT))]
    assert [what for _, _, what in home] == ["name"], home  # settings_env.raw, once


def test_every_vicar_name_in_the_code_is_declared():
    from vicar.settings_env import BY_NAME, VARS

    assert len(BY_NAME) == len(VARS)  # declared once
    named = {m for _, source in _sources() for m in VICAR_NAME.findall(source)}
    # Prefixes written in prose ("VICAR_MAX_*") are not names.
    named = {n for n in named if n not in ("VICAR_MAX", "VICAR_AUTONOMY")}
    assert named - set(BY_NAME) == set()
    # The CLI's options that click reads from the environment are declared too.
    cli = "".join(p.read_text() for p in (ROOT / "vicar" / "cli").glob("*.py"))
    envvars = set(re.findall(r'envvar="([A-Z_]+)"', cli))
    assert envvars and envvars <= set(BY_NAME)
    with pytest.raises(KeyError, match="not declared"):
        __import__("vicar.settings_env").settings_env.raw("VICAR_NOT_A_SETTING")


def test_the_configuration_page_is_generated_from_the_settings():
    from vicar.config_doc import render
    from vicar.settings_env import VARS

    page = render()
    assert PAGE.read_text() == page, "python -m vicar.config_doc > docs/configuration.md"
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `VICAR_")}
    assert list(rows) == [v.name for v in VARS]
    for name in ("VICAR_WEBHOOK_URL", "VICAR_GATE_DEADLINE_SECONDS", "VICAR_EMBED_THREADS"):
        cells = [c.strip() for c in rows[name].split("|")[1:-1]]
        assert all(cells) and len(cells[3]) > 20, cells
    # Defaults come from Settings itself: the deadline's week, the grace's 30 s.
    assert "| `VICAR_GATE_DEADLINE_SECONDS` | `604800` |" in page
    assert "| `VICAR_SHUTDOWN_GRACE_SECONDS` | `30` |" in page
    assert "test-only" in rows["VICAR_TEST_MOVE_PIECE_DELAY"]
    # The generator's own check, as CI or a person runs it.
    run = subprocess.run(
        [sys.executable, "-m", "vicar.config_doc", "--check", str(PAGE)], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr


def test_the_defaults_are_those_of_the_settings_models(monkeypatch):
    for name in __import__("vicar.settings_env").settings_env.BY_NAME:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VICAR_DATA_DIR", "/tmp/vicar-defaults")
    assert Settings.from_env() == Settings(data_dir=Path("/tmp/vicar-defaults"))


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("VICAR_EMBED_THREADS", "two", "VICAR_EMBED_THREADS must be a whole number, not 'two'"),
        ("VICAR_EMBEDDER", "word2vec", "unknown VICAR_EMBEDDER 'word2vec'; available: minilm, minilm-torch, openai"),
        ("VICAR_PREDICTOR", "gemini", "unknown VICAR_PREDICTOR 'gemini'; available: learned, offline, anthropic"),
        ("VICAR_LLM_TIMEOUT", "-1", "VICAR_LLM_TIMEOUT must be positive, got '-1'"),
    ],
)
def test_a_bad_value_stops_the_start_in_one_line(monkeypatch, name, value, says):
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidInput) as info:
        Settings.from_env()
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_embedder_settings_reach_the_model(monkeypatch):
    monkeypatch.setenv("VICAR_EMBEDDER", " MiniLM ")
    monkeypatch.setenv("VICAR_EMBED_THREADS", "2")
    monkeypatch.setenv("VICAR_OPENAI_EMBEDDING_MODEL", "text-embedding-3-large")
    params = Settings.from_env().embedder
    assert (params.name, params.threads, params.openai_model) == ("minilm", 2, "text-embedding-3-large")
    monkeypatch.setenv("VICAR_EMBED_THREADS", "0")
    assert Settings.from_env().embedder.threads == 1  # as before: at least one thread
