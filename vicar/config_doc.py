"""docs/configuration.md, generated from the settings themselves so it cannot drift:
`python -m vicar.config_doc > docs/configuration.md` (tests/test_configuration_doc.py
fails when the committed page differs)."""

from __future__ import annotations

import sys
from pathlib import Path

from vicar.config import LLMEnv, Settings
from vicar.settings_env import VARS, Var

HEADER = """# Configuration

Vicar reads its settings from the environment. Every variable is declared once, in
`vicar/settings_env.py`, and checked when a command or the worker starts: a value it
does not accept stops it with one line naming the variable (exit code 2), never a
traceback. This page is generated from those declarations and from the defaults of
`vicar.config.Settings`: `python -m vicar.config_doc > docs/configuration.md`.

Temporal's own variables (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`,
`TEMPORAL_TLS*`, `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`) are the SDK's environment
configuration: when any is set (or `~/.config/temporalio/temporal.toml` exists) Vicar
connects there and registers its search attributes if missing; otherwise it starts the
embedded server. `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` and
`OPENAI_BASE_URL` are the providers' SDK variables, read by the worker only. Keys stay
in the worker's environment, never in workflow input, history or logs.
"""


def _shown(value: object) -> str:
    if value is None or value == []:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def default_of(var: Var, settings: Settings) -> str:
    if var.default is not None:
        return var.default
    # The LLM's settings are read where the predictor is made, not carried in Settings.
    parts = (var.field or "").split(".")
    value: object = LLMEnv() if parts[0] == "llm" else settings
    for part in parts[1:] if parts[0] == "llm" else parts:
        value = getattr(value, part)
    return _shown(value)


def render() -> str:
    settings = Settings()
    out = [HEADER]
    section = None
    for var in VARS:
        if var.section != section:
            section = var.section
            out += [f"\n## {section}\n", "| variable | default | accepts | meaning |", "|---|---|---|---|"]
        meaning = var.help + (" (secret: never logged)" if var.secret else "")
        meaning += " — test-only: never set it in a deployment" if var.test_only else ""
        out.append(f"| `{var.name}` | {default_of(var, settings)} | {var.accepts} | {meaning} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if argv[:1] == ["--check"]:
        path = Path(argv[1]) if len(argv) > 1 else Path("docs/configuration.md")
        if not path.exists() or path.read_text() != page:
            print(f"{path} is out of date: python -m vicar.config_doc > {path}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
