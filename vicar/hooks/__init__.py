"""Where coding agents ask: Vicar answers Claude Code's and Codex's permission hooks
(`PreToolUse`, `PermissionRequest`) as a gate for the principal whose hook token the call
carries, in each agent's own protocol (docs/claude-code.md, docs/codex.md).

protocol.py speaks the hooks' JSON and imports the standard library only, so the thin
command (`python -m vicar.hooks claude-code|codex --url ...`, thin.py) starts in tens of
milliseconds; tool_call.py turns a tool call into a gate request; decide.py opens the gate
and waits; http.py is the inbox server's endpoint; tokens.py the hook tokens;
install.py writes and checks an agent's settings (`vicar hook install`).
"""
