"""Where coding agents ask: Vicar answers Claude Code's (and Codex's, same protocol)
permission hooks, `PreToolUse` and `PermissionRequest`, as a gate for the configured
principal, and learns from `PostToolUse` what the person allowed in the agent's own
prompt (docs/claude-code.md).

protocol.py speaks the hook's JSON and imports the standard library only, so the thin
command (`python -m vicar.hooks claude-code --url ...`, thin.py) starts in tens of
milliseconds; tool_call.py turns a tool call into a gate request; decide.py opens the gate
and waits; http.py is the inbox server's endpoint.
"""
