"""Vicar's ACT-R activation memory: chunks, traces in interaction time, vectors, retrieval.

This folder stands at the repository's top, as the design lays Vicar out, but installs
as `vicar.memory` (`package-dir` in pyproject.toml): `from vicar.memory import ...`
reads this folder; there is no `vicar/memory/`. One installed namespace, `vicar`, so
nothing at the top level collides with an orchestrator's own `memory` package or module
(tests/test_packaging.py)."""
