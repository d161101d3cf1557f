"""Recipes: Vicar behind the agent frameworks people use (docs/recipes.md), installed with
Vicar so `from vicar.recipes.openai_agents import run_with_vicar` works in any project.

`ask.py`'s `ask_vicar` is the one call every recipe makes and needs nothing beyond Vicar;
`openai_agents.py` and `langgraph_agent.py` need their frameworks (`pip install
'vicar[recipes]'`); `plain_agent.py` needs nothing more. Importing this package imports
no framework."""
