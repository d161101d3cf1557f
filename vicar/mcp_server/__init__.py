"""`vicar mcp`: Vicar's gate and AskQuestion as MCP tools (docs/mcp.md). Named
mcp_server, not mcp, so that it never shadows the MCP SDK's own `mcp` package.
gates.py holds the tools' work (no SDK); server.py the MCP server around it."""
