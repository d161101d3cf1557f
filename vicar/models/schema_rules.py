"""The worker's input rules in JSON Schema terms, for the models' Field(json_schema_extra=...).

Each rule has one definition: the schema's pattern is derived from the regex the
validator runs, so `vicar schema` cannot accept what the worker refuses. Patterns are
JSON Schema's dialect (ECMA-262, where "$" ends the input, as "\\Z" does in Python);
they avoid look-around so validators built on RE2 (Go, Rust) compile them too.

The schemas describe the canonical form: the worker strips surrounding blanks from a
request's texts before it checks them, the schema does not, so it is the stricter of
the two there and never the looser. Pure: importable inside the workflow sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vicar.memory.names import PRINCIPAL_RE


def json_pattern(rx: re.Pattern) -> str:
    """A `^...\\Z` Python regex as the JSON Schema pattern that matches the same strings."""
    if not (rx.pattern.startswith("^") and rx.pattern.endswith(r"\Z")):
        # Refuse at import rather than publish a pattern that means something else.
        raise ValueError(f"cannot express {rx.pattern!r} as a JSON Schema pattern")
    return rx.pattern[:-2] + "$"


PRINCIPAL_PATTERN = json_pattern(PRINCIPAL_RE)
GATE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}\Z")
GATE_ID_PATTERN = json_pattern(GATE_ID_RE)
NONBLANK_PATTERN = r"\S"  # a text the worker strips and then needs non-empty
# check_responder: 1-64 printable characters once stripped. Control characters are what
# RE2 and ECMA can both name; other non-printables (format characters) pass here and are
# refused by the gate's validator.
_CONTROL = r"\x00-\x1f\x7f-\x9f"
RESPONDER_PATTERN = rf"^[^{_CONTROL}]*[^\s{_CONTROL}][^{_CONTROL}]*$"


def required_string(pattern: str, max_length: int):
    """For a field that is Optional only so the gate's validator (not the converter) says
    it is missing: the schema asks for the string."""

    def extra(schema: dict) -> None:
        schema.pop("anyOf", None)
        schema.pop("default", None)
        schema.update(type="string", pattern=pattern, minLength=1, maxLength=max_length)

    return extra


def answer_rules(required: Iterable[str], actions_needing_text: Iterable[str]):
    """HumanAnswer's object-level rules: fields the gate requires, and actions whose
    answer must carry text (a dialog turn is a question for the agent)."""
    required, needing_text = list(required), sorted(actions_needing_text)

    def extra(schema: dict) -> None:
        schema["required"] = sorted(set(schema.get("required", [])) | set(required))
        if needing_text:
            schema["allOf"] = [
                {
                    "if": {"properties": {"action": {"enum": needing_text}}, "required": ["action"]},
                    "then": {"required": ["text"], "properties": {"text": {"pattern": NONBLANK_PATTERN}}},
                }
            ]

    return extra
