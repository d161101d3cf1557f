"""Vicar's settings: one validated model (`Settings`, pydantic-settings) read from the
VICAR_* environment at start, its sections, the variables read where they are used
(`ReadAtUse`: the secrets and the debug switch), and the page generated from them
(docs/configuration.md, `python -m vicar.settings.doc`).

Read by the CLI, the worker and what they call; memory/ (the ground floor) reads no
environment: its callers pass it these values.
"""

from vicar.memory.params import EmbedderParams, MemoryParams  # carried by Settings, defined on the ground floor
from vicar.settings.at_use import ReadAtUse, debugging, secret
from vicar.settings.model import (
    ANSWER_TIMEOUT,
    DEFAULT_GATE_DEADLINE_SECONDS,
    LIMIT_VARS,
    OPS_VARS,
    TASK_QUEUE,
    Settings,
)
from vicar.settings.sections import (
    MAX_SHUTDOWN_GRACE_SECONDS,
    PREDICTORS,
    AutonomyParams,
    CalibrationParams,
    FactParams,
    LimitParams,
    LLMParams,
    OpsParams,
    PredictorParams,
    RetrievalOptions,
    ServerPorts,
    SessionParams,
)
from vicar.settings.variables import variable_of

__all__ = [
    "ANSWER_TIMEOUT",
    "DEFAULT_GATE_DEADLINE_SECONDS",
    "LIMIT_VARS",
    "MAX_SHUTDOWN_GRACE_SECONDS",
    "OPS_VARS",
    "PREDICTORS",
    "TASK_QUEUE",
    "AutonomyParams",
    "CalibrationParams",
    "EmbedderParams",
    "FactParams",
    "LLMParams",
    "LimitParams",
    "MemoryParams",
    "OpsParams",
    "PredictorParams",
    "ReadAtUse",
    "RetrievalOptions",
    "ServerPorts",
    "SessionParams",
    "Settings",
    "debugging",
    "secret",
    "variable_of",
]
