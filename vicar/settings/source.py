"""Where the settings models read the environment: pydantic-settings' environment source,
given the declared variables (vicar/settings/variables.py) and the fields they fill.

Only the declared names are read: a section is never taken whole from a JSON value, and
a name the table lacks fills nothing. Surrounding spaces are dropped and an empty value
counts as unset. A refusal names the variable, says what it accepts and shows the value
unless it is a secret; one line per bad value.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource

from vicar.errors import SettingsError
from vicar.settings.variables import Reader, Var, read_by


class Variables(EnvSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], reader: Reader) -> None:
        super().__init__(settings_cls, case_sensitive=True)
        self.declared = read_by(reader)
        prefix = settings_cls.model_config.get("env_prefix", "")
        assert all(v.name.startswith(prefix) for v in self.declared), prefix

    def given(self) -> dict[str, tuple[Var, str]]:
        """{field path: (variable, stripped value)} for every declared variable set."""
        out = {}
        for var in self.declared:
            raw = (self.env_vars.get(var.name) or "").strip()
            if raw and var.field:
                out[var.field] = (var, raw)
        return out

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for field, (var, raw) in self.given().items():
            *sections, name = field.split(".")
            place = values
            for section in sections:
                place = place.setdefault(section, {})
            place[name] = var.parse(raw) if var.parse else raw
        return values


def refusal(exc: ValidationError, given: dict[str, tuple[Var, str]], init: set[str]) -> SettingsError:
    """One line per bad value: the variable that gave it (unless the caller passed that
    section itself, `init`), or the field's path and pydantic's reason."""
    lines: list[str] = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        # A union's member joins the location (shard_count.int): the longest declared prefix.
        hit = next((given[".".join(loc[:n])] for n in range(len(loc), 0, -1) if ".".join(loc[:n]) in given), None)
        if hit and loc[0] not in init:
            var, raw = hit
            shown = " (the value is not shown: it may hold a token)" if var.secret else f", not {raw!r}"
            line = f"{var.name} must be {var.accepts.replace('`', '')}{shown}"
        else:
            line = f"{'.'.join(loc) or 'settings'}: {error['msg']}"
        if line not in lines:
            lines.append(line)
    return SettingsError(lines)
