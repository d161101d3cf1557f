"""Vicar's ACT-R activation memory: chunks, traces in interaction time, vectors, retrieval."""
