"""Temporal activities: thin wrappers that run the proxy's steps against the memory."""
