"""Temporal workflows. Deterministic: no I/O, clock or randomness except through `workflow`.

This folder stands at the repository's top, as the design lays Vicar out, but installs
as `vicar.workflows` (`package-dir` in pyproject.toml): `from vicar.workflows import
...` reads this folder; there is no `vicar/workflows/`. One installed namespace,
`vicar`, so nothing at the top level collides with an orchestrator's own `workflows`
package or module (tests/test_packaging.py)."""
