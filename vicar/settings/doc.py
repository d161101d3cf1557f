"""docs/configuration.md, generated from the settings models and the declared variables,
so it cannot drift: `python -m vicar.settings.doc > docs/configuration.md`
(`--check PATH` exits 1 when the committed page differs; tests/test_configuration_doc.py
runs it)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from vicar.settings.at_use import ReadAtUse
from vicar.settings.model import Settings
from vicar.settings.variables import VARIABLES, Var

HEADER = """# Configuration

Vicar reads its settings from the environment. Every variable is declared once, in
`vicar/settings/variables.py`, beside the field it fills in `vicar.settings.Settings`
(a pydantic-settings model) and checked when a command or the worker starts: each value
it does not accept stops it with one line naming the variable and what it accepts (exit
code 2), never a traceback. The secrets (payload keys, the codec server's token) are
read where they are used and never shown in a repr, a refusal or a log line. This page
is generated from those declarations and the models' defaults:
`python -m vicar.settings.doc > docs/configuration.md`.

Temporal's own variables (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`,
`TEMPORAL_TLS*`, `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`) are the SDK's environment
configuration: when any is set (or `~/.config/temporalio/temporal.toml` exists) Vicar
connects there and registers its search attributes if missing; otherwise it starts the
embedded server. `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` and
`OPENAI_BASE_URL` are the providers' SDK variables, read by the worker only. Keys stay
in the worker's environment, never in workflow input, history or logs.

The design's mechanisms (probation, the trust floor, regret, censors, preferences,
procedures, the storage decision, the trust feature) run as shipped: their values are the
models' defaults, not settings. The replay switches them through its evaluation profile
(`vicar/eval/profile.py`, [evaluation.md](evaluation.md)).
"""


def shown(value: object) -> str:
    if value is None or value == []:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def default_of(var: Var) -> str:
    """The default the page shows: the declared text, else the model's own default."""
    if var.default is not None:
        return var.default
    assert var.field, var.name
    first, *rest = var.field.split(".")
    model = Settings if var.read_by == "Settings" else ReadAtUse
    value: object = model.model_fields[first].get_default(call_default_factory=True)
    for part in rest:
        assert isinstance(value, BaseModel), var.field
        value = getattr(value, part)
    return shown(value)


def render() -> str:
    out = [HEADER]
    sections: dict[str, list[Var]] = {}
    for var in VARIABLES:
        sections.setdefault(var.section, []).append(var)
    for section, variables in sections.items():
        out += [f"\n## {section}\n", "| variable | default | accepts | meaning |", "|---|---|---|---|"]
        for var in variables:
            meaning = var.help + (" (secret: never shown)" if var.secret else "")
            out.append(f"| `{var.name}` | {default_of(var)} | {var.accepts} | {meaning} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if argv[:1] == ["--check"]:
        path = Path(argv[1]) if len(argv) > 1 else Path("docs/configuration.md")
        if not path.exists() or path.read_text() != page:
            print(f"{path} is out of date: python -m vicar.settings.doc > {path}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
