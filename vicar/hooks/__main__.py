"""`python -m vicar.hooks claude-code|codex --url ... --token-file ...`: the fast command
hook (vicar/hooks/thin.py)."""

from vicar.hooks.thin import main

main()
