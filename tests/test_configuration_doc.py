"""Settings have one home: each VICAR_* variable is declared once
(vicar/settings/variables.py) beside the field it fills in one validated model, read
from the environment only by pydantic-settings through the package's one source, every
bad value refused at start in a line of its own, secrets never shown, and
docs/configuration.md generated from the declarations and the models."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from vicar.errors import InvalidInput, SettingsError
from vicar.settings import ReadAtUse, Settings
from vicar.settings.doc import default_of, render, shown
from vicar.settings.variables import BY_NAME, VARIABLES

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
HOME = ROOT / "vicar" / "settings"
SCANNED = ("vicar", "memory", "activities", "workflows")
VICAR_NAME = re.compile(r"\bVICAR_[A-Z0-9_]*[A-Z0-9]\b")
# Environment reads of names held in a variable that are not Vicar's: the providers'
# keys, by provider, and Temporal's own variables.
NOT_VICAR = {
    ("vicar/proxy/select.py", "KEY_ENV[provider]"),
    ("vicar/proxy/select.py", "KEY_ENV[name]"),
    ("vicar/runtime/server.py", "k"),
}
# Gone in issue 35: dead (the rule's window), test-only (the delays), and the research
# switches the replay sets through its evaluation profile (vicar/eval/profile.py).
REMOVED = {
    "VICAR_AUTONOMY_WINDOW": None,
    "VICAR_TEST_MOVE_PIECE_DELAY": None,
    "VICAR_TEST_CONSOLIDATION_STEP_DELAY": None,
    "VICAR_PROBATION_ANSWERS": ("calibration", "probation_answers", "0"),
    "VICAR_TRUST_FLOOR": ("calibration", "trust_floor", "0"),
    "VICAR_REGRET_WINDOW": ("calibration", "regret_window", "100"),
    "VICAR_CENSOR_MIN": ("calibration", "censor_min", "3"),
    "VICAR_CENSOR_SIMILARITY": ("calibration", "censor_similarity", "0.9"),
    "VICAR_PREFERENCES": ("facts", "preferences", "false"),
    "VICAR_PROCEDURES": ("facts", "procedures", "false"),
    "VICAR_HINDSIGHT_FACTOR": ("facts", "hindsight_factor", "2"),
    "VICAR_STORAGE_DECISION": ("memory", "storage", "true"),
    "VICAR_TRUST_FEATURE": ("predictor", "trust_feature", "true"),
}


@pytest.fixture
def clean(monkeypatch):
    """No declared variable set (the suite's conftest sets some)."""
    for name in [*BY_NAME, *REMOVED]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


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
    """Reads of a VICAR_* name, or of a name held in a variable (which could be one)."""
    return [
        (file, line, what)
        for file, line, what in environment_reads(root)
        if not (what[:1] in "'\"" and not VICAR_NAME.search(what)) and (file, what) not in NOT_VICAR
    ]


def test_the_environment_is_read_by_the_settings_source_alone(clean):
    assert stray_reads() == []
    # The settings package itself never touches os.environ: pydantic-settings reads it.
    assert [r for r in environment_reads() if r[0].startswith("vicar/settings/")] == []
    assert not re.search(r"\benviron\b|getenv", "".join(p.read_text() for p in HOME.glob("*.py")))
    # Only declared names fill anything: a field's own name, or a section as JSON (what
    # pydantic-settings' default source would read), is not a variable.
    clean.setenv("VICAR_MAX_DIALOG_TURNS", "9")
    clean.setenv("VICAR_CALIBRATION", '{"cap": 0.9}')
    clean.setenv("VICAR_DEBUG", "1")
    s = Settings.from_env()
    assert (s.max_dialog_turns, s.calibration.cap) == (5, 0.5)
    assert ReadAtUse().debug and not ReadAtUse(debug=False).debug


def test_every_vicar_name_in_the_code_is_declared_once_with_its_field():
    # 51 before issue 35, less the 13 in REMOVED; 3 for the hook, 3 for webhooks and Slack (issue 38);
    # 4 for the embedded server's ports (issue 37)
    assert len(BY_NAME) == len(VARIABLES) == 48
    named = {m for _, source in _sources() for m in VICAR_NAME.findall(source)}
    # Prefixes written in prose ("VICAR_MAX_*") are not names.
    named = {n for n in named if n not in ("VICAR_MAX", "VICAR_AUTONOMY")}
    assert named - set(BY_NAME) == set()
    assert set(REMOVED) & named == set()
    # The CLI's options that click reads from the environment are declared too.
    cli = "".join(p.read_text() for p in (ROOT / "vicar" / "cli").glob("*.py"))
    envvars = set(re.findall(r'envvar="([A-Z_]+)"', cli))
    assert envvars and envvars <= set(BY_NAME)
    # Each fills a field that exists (the page's default is that field's).
    for var in VARIABLES:
        if var.read_by == "cli":
            assert var.field is None and var.default, var
            continue
        model: type[BaseModel] = Settings if var.read_by == "Settings" else ReadAtUse
        assert var.field, var.name
        *sections, name = var.field.split(".")
        for section in sections:
            model = type(model.model_fields[section].get_default(call_default_factory=True))
        assert name in model.model_fields, var.name


def test_the_configuration_page_is_generated_from_the_settings():
    page = render()
    assert PAGE.read_text() == page, "python -m vicar.settings.doc > docs/configuration.md"
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `VICAR_")}
    assert list(rows) == [v.name for v in VARIABLES]
    for name in ("VICAR_WEBHOOK_URL", "VICAR_GATE_DEADLINE_SECONDS", "VICAR_EMBED_THREADS"):
        cells = [c.strip() for c in rows[name].split("|")[1:-1]]
        assert all(cells) and len(cells[3]) > 20, cells
    # Defaults come from the models themselves: the deadline's week, the grace's 30 s.
    assert "| `VICAR_GATE_DEADLINE_SECONDS` | `604800` |" in page
    assert "| `VICAR_SHUTDOWN_GRACE_SECONDS` | `30` |" in page
    assert "secret" in rows["VICAR_CODEC_KEYS"] and "secret" in rows["VICAR_WEBHOOK_URL"]
    assert "vicar/eval/profile.py" in page and not set(REMOVED) & set(rows)
    # The generator's own check, as CI or a person runs it.
    run = subprocess.run(
        [sys.executable, "-m", "vicar.settings.doc", "--check", str(PAGE)], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr


def test_the_page_shows_the_defaults_the_model_runs_with(clean):
    """With nothing set, every variable's field holds the default its row shows."""
    settings, at_use = Settings.from_env(), ReadAtUse()
    for var in VARIABLES:
        if var.default is not None or not var.field:
            continue  # the row tells a story instead (the data dir's home, the keys' fallback)
        value: object = settings if var.read_by == "Settings" else at_use
        for part in var.field.split("."):
            value = getattr(value, part)
        assert default_of(var) == shown(value), var.name


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("VICAR_EMBED_THREADS", "two", "VICAR_EMBED_THREADS must be a whole number (below 1 counts as 1), not 'two'"),
        ("VICAR_EMBEDDER", "word2vec", "VICAR_EMBEDDER must be minilm, minilm-torch or openai (any case)"),
        ("VICAR_PREDICTOR", "gemini", "VICAR_PREDICTOR must be learned, offline, anthropic or openai (any case)"),
        ("VICAR_LLM_TIMEOUT", "-1", "VICAR_LLM_TIMEOUT must be a positive number, not '-1'"),
        ("VICAR_AUTONOMY_AUDIT_SHARE", "1.5", "VICAR_AUTONOMY_AUDIT_SHARE must be a number from 0 to 1, not '1.5'"),
        ("VICAR_SHARD_COUNT", "0", "VICAR_SHARD_COUNT must be a whole number from 1 to 1024, not '0'"),
        ("VICAR_SESSION_TOKEN_BUDGET", "-5", "VICAR_SESSION_TOKEN_BUDGET must be a whole number >= 0, not '-5'"),
        ("VICAR_REQUIRE_IDENTITY_MATCH", "maybe", "VICAR_REQUIRE_IDENTITY_MATCH must be true/false, 1/0 or yes/no"),
    ],
)
def test_a_bad_value_stops_the_start_in_one_line(clean, name, value, says):
    clean.setenv(name, value)
    with pytest.raises(InvalidInput) as info:
        Settings.from_env()
    assert str(info.value) == says if says.endswith("'") else says in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


def test_every_bad_value_is_named_at_once_and_a_secret_never_shown(clean):
    token = "xoxb-0123456789-secret-token"
    clean.setenv("VICAR_AUTONOMY_DELTA", "1")
    clean.setenv("VICAR_OPS_ADDRESS", "localhost:8080")
    clean.setenv("VICAR_WEBHOOK_URL", f"ftp://hooks.example.org/{token}")
    clean.setenv("VICAR_DATA_DIR", "/tmp/vicar-settings-test")
    with pytest.raises(SettingsError) as info:
        Settings.from_env()
    assert info.value.lines == [
        "VICAR_AUTONOMY_DELTA must be a number between 0 and 1, not '1'",
        "VICAR_WEBHOOK_URL must be an http(s) URL with a host (the value is not shown: it may hold a token)",
        "VICAR_OPS_ADDRESS must be IP:PORT (e.g. 0.0.0.0:8080), or off/0, not 'localhost:8080'",
    ]
    # The CLI prints each, with the exit code of bad input, before it does anything.
    from vicar.cli import app

    result = CliRunner().invoke(app, ["escalations"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert [e.removeprefix("error: ") for e in errors] == info.value.lines and token not in result.output


def test_secrets_are_in_no_repr(clean):
    key, token, url = "k1:" + "A" * 44, "a-token-of-32-characters-exactly", "https://hooks.example.org/T0/B0/XYZ"
    clean.setenv("VICAR_CODEC_KEYS", key)
    clean.setenv("VICAR_CODEC_SERVER_TOKEN", token)
    clean.setenv("VICAR_WEBHOOK_URL", url)
    at_use, settings = ReadAtUse(), Settings.from_env()
    assert at_use.codec_keys and at_use.codec_keys.get_secret_value() == key and settings.webhook_url == url
    shown = " ".join((repr(at_use), str(at_use), repr(settings), str(settings), str(at_use.model_dump())))
    assert key not in shown and token not in shown and url not in shown


def test_the_removed_variables_fill_nothing(clean):
    for name, where in REMOVED.items():
        if where:
            clean.setenv(name, where[2])
    shipped = Settings.from_env()
    for name, where in REMOVED.items():
        if where:
            section, field, _ = where
            assert getattr(getattr(shipped, section), field) == getattr(type(getattr(shipped, section))(), field), name


def test_the_embedder_settings_reach_the_model(clean):
    clean.setenv("VICAR_EMBEDDER", " MiniLM ")
    clean.setenv("VICAR_EMBED_THREADS", "2")
    clean.setenv("VICAR_OPENAI_EMBEDDING_MODEL", "text-embedding-3-large")
    params = Settings.from_env().embedder
    assert (params.name, params.threads, params.openai_model) == ("minilm", 2, "text-embedding-3-large")
    clean.setenv("VICAR_EMBED_THREADS", "0")
    assert Settings.from_env().embedder.threads == 1  # as before: at least one thread
