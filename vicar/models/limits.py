"""Size limits of the texts Vicar takes in: the models' own max_length (vicar/models/__init__.py),
which Settings may lower for the CLI (VICAR_MAX_*). Pydantic only: importable in the
workflow sandbox."""

from __future__ import annotations

from pydantic import BaseModel


class TextLimits(BaseModel):
    """Size limits of the texts Vicar takes in. The defaults are the models' own
    max_length, enforced wherever a model is validated, the workflow sandbox included
    (it cannot read the environment); Settings may lower them for the CLI (VICAR_MAX_*)."""

    question: int = 4000
    actor_message: int = 20_000
    artifact_text: int = 200_000
    answer_text: int = 20_000
    artifact_file_bytes: int = 100_000  # read per artifact path


DEFAULT_LIMITS = TextLimits()
# Names and short labels (task type, agent, session, responder, action) and paths.
TASK_TYPE_CHARS = 100
NAME_CHARS = 200
PATH_CHARS = 4096
MAX_ARTIFACT_PATHS = 20
TITLE_CHARS = 1000  # an artifact's title (a patch subject, a topic branch) and its lineage
