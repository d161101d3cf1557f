"""The rules page's forms read into the changes `vicar rules add` and `vicar principal
pause|resume` send: the same Rule and ControlChange models validate them (and the
brain validates again), so the page refuses exactly what the CLI refuses."""

from __future__ import annotations

import re

from pydantic import ValidationError

from vicar.errors import InvalidInput, validation_summary
from vicar.models.control import Rule

# The fields of the add-rule form; the list fields take one value per line, and the
# short ones (task types, agents, path globs) commas too.
LIST_FIELDS = ("task_types", "upstream_agents", "paths", "lineages", "words")
COMMA_LISTS = ("task_types", "upstream_agents", "paths")
TEXT_FIELDS = ("name", "effect", "regex", "text_in", "text", "target")


def _values(form: dict[str, list[str]], name: str) -> list[str]:
    raw = "\n".join(form.get(name, []))
    parts = re.split(r"[\n,]" if name in COMMA_LISTS else r"\n", raw)
    return [p.strip() for p in parts if p.strip()]


def rule_from_form(form: dict[str, list[str]], author: str) -> Rule:
    """The rule the form describes, written by the signed-in `author`; InvalidInput in
    one line (`field: what`) if the CLI would refuse it too."""
    first = {k: (form.get(k) or [""])[0] for k in TEXT_FIELDS}
    data: dict = {k: _values(form, k) for k in LIST_FIELDS}
    data.update(
        name=first["name"].strip(),
        effect=first["effect"],
        author=author,
        states=[s for s in form.get("states", []) if s],
        regex=first["regex"] or None,
        text_in=first["text_in"] or "both",
        text=first["text"],
        target=first["target"].strip() or None,  # a number as typed; the model refuses anything else
    )
    try:
        return Rule.model_validate(data)
    except ValidationError as exc:
        # pydantic prefixes a validator's own message with its kind: the message is enough.
        said = validation_summary(exc).replace("Value error, ", "")
        raise InvalidInput(f"rule not added: {said}") from None


def kept(form: dict[str, list[str]]) -> dict[str, object]:
    """What was typed, to fill the form again beside its error."""
    out: dict[str, object] = {k: (form.get(k) or [""])[0] for k in TEXT_FIELDS}
    out.update({k: "\n".join(form.get(k, [])) for k in LIST_FIELDS})
    out["states"] = form.get("states", [])
    return out


def scope(form: dict[str, list[str]]) -> dict[str, str | None]:
    """A pause's or resume's scope: a state, a task type, both or neither (everything)."""
    state = (form.get("state") or [""])[0].strip()
    task_type = (form.get("task_type") or [""])[0].strip()
    return dict(state=state or None, task_type=task_type or None)
