"""Replay evaluation: the proxy's predictions against real reviewers' decisions."""
