"""The human's web inbox (docs/inbox.md): the gates waiting for this person, each with
its artifact and the proxy's words, answered in one tap; what the proxy answered alone
in their name, to judge; their rules, the pause switch and the proxy's health. A
Starlette app with server-rendered templates, a Temporal client only."""
