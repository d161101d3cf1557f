"""Temporal activities: thin wrappers that run the proxy's steps against the memory.

This folder stands at the repository's top, as the design lays Vicar out, but installs
as `vicar.activities` (`package-dir` in pyproject.toml): `from vicar.activities import
...` reads this folder; there is no `vicar/activities/`. One installed namespace,
`vicar`, so nothing at the top level collides with an orchestrator's own `activities`
package or module (tests/test_packaging.py)."""
