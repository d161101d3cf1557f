"""Vicar: a human proxy for approval gates."""
