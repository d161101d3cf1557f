"""Temporal workflows. Deterministic: no I/O, clock or randomness except through `workflow`."""
