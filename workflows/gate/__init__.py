"""The approval gate (VicarGate): workflow.py is the workflow class, its handlers and
`run` read top to bottom; steps.py the steps it takes, plain functions over the state in
state.py. Its contract (names, payloads, activity options) is vicar/contracts/gate.py."""

from vicar.workflows.gate.workflow import GateWorkflow

__all__ = ["GateWorkflow"]
